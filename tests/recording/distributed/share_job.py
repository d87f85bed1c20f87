"""Run by the tests under torchrun: `opwire ranks`, `diff` and `replay` of run directories, each split over the
launched processes; every process writes each command's exit code and what it printed to OUT.<command>.<RANK>.

Each command runs in a child process forked by this process, after it imported torch and the CLI once, as the
tests' CLI fork server does (tests/support/cli_forkserver.py): the child calls `opwire.cli.main(argv)`, what
`torchrun -m opwire ...` would run. This process itself never joins a gloo group (one that joined and left one does
not fork sandboxed children safely afterwards). Each command gets a rendezvous store of its own: a port next to the
launcher's, served by process 0's child (children of one launch would otherwise meet on the launcher's store under
the same keys)."""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "support"))
from cli_forkserver import prepare, run_command  # tests/support, beside the CLI fork server

run, other, out = sys.argv[1:4]
commands = (("ranks", ["ranks", run]), ("diff", ["diff", run, other]), ("replay", ["replay", run]))
prepare()
launcher_port = int(os.environ["MASTER_PORT"])
os.environ["TORCHELASTIC_USE_AGENT_STORE"] = "False"
for k, (name, argv) in enumerate(commands):
    os.environ["MASTER_PORT"] = str(launcher_port + 1 + k)  # the forked command's environment
    stdout = f"{out}.{name}.{os.environ['RANK']}"
    done = run_command({"argv": argv, "cwd": os.getcwd(), "out": stdout, "err": f"{stdout}.err", "timeout": 240})
    code = -1 if done.get("timeout") else done["returncode"]
    printed = Path(stdout).read_text()
    Path(stdout).write_text(f"{code}\n{printed}")
