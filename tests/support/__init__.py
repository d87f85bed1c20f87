"""What the tests share and are not tests: the export corpus, the hostile tables, CLI and fuzz child processes.

Imported as a package (`from support import corpus`, `from support.clirun import Cli`): pytest puts tests/ on
sys.path through `pythonpath` in pyproject.toml; benchmarks put tests/ there themselves. Helpers that serve
one test module only (a fuzz worker, a torchrun job, an op library under validation) stay beside it.
"""
