"""An import of an opwire module inside a function says why it is there (issue 28, item 3).

Imports go at the top of the file. One inside a function is kept only where it breaks a real import cycle or
defers a heavy dependency (torch, pydantic) from a module that must load without it, and then a comment on its
line or the line before says which: `# deferred: imports torch` or `# cycle: X imports this module`.
`TYPE_CHECKING` blocks are at module level, so they are not concerned.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "opwire"

_REASONS = ("# deferred:", "# cycle:")


def _is_own(node: ast.Import | ast.ImportFrom) -> bool:
    if isinstance(node, ast.ImportFrom):
        return bool(node.level) or (node.module or "").split(".")[0] == "opwire"
    return any(a.name.split(".")[0] == "opwire" for a in node.names)


def unexplained(source: str, where: str) -> list[str]:
    """`where:line` of every import of an opwire module inside a function without a reason beside it."""
    lines = source.splitlines()
    found = set()
    for func in ast.walk(ast.parse(source)):
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(func):
            if not isinstance(node, (ast.Import, ast.ImportFrom)) or not _is_own(node):
                continue
            own = lines[node.lineno - 1]
            before = lines[node.lineno - 2].strip() if node.lineno > 1 else ""
            if not any(r in own for r in _REASONS) and not before.startswith(_REASONS):
                found.add((node.lineno, own.strip()))
    return [f"{where}:{n}: {text}" for n, text in sorted(found)]


def test_every_function_level_import_of_opwire_says_why() -> None:
    bad: list[str] = []
    for path in sorted(ROOT.rglob("*.py")):
        where = path.relative_to(ROOT.parent).as_posix()
        bad += unexplained(path.read_text(encoding="utf-8"), where)
    assert bad == [], (
        "imports of opwire modules inside functions: move each to the top of its file, or say on its line why it "
        "stays (`# deferred: imports torch` on a path that must load without it, `# cycle: X imports this module`, "
        "after checking that moving it breaks `python -c 'import opwire.X'` or tests/test_import_cycles.py):\n"
        + "\n".join(bad)
    )


def test_the_check_sees_a_bare_import_and_accepts_a_reason() -> None:
    source = (
        "import os\n"
        "from opwire import errors\n"
        "def f():\n"
        "    import json\n"
        "    from opwire.serde import tensors\n"
        "    from . import sibling\n"
        "    from opwire.recording import recorder  # deferred: imports torch\n"
        "    # cycle: opwire.program.opened imports this module\n"
        "    from opwire.program import opened\n"
        "    def g():\n"
        "        import opwire.view\n"
    )
    assert unexplained(source, "opwire/x.py") == [
        "opwire/x.py:5: from opwire.serde import tensors",
        "opwire/x.py:6: from . import sibling",
        "opwire/x.py:11: import opwire.view",
    ]
