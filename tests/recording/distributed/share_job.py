"""Run by the tests under torchrun: `opwire ranks`, `diff` and `replay` of run directories, each split over the
launched processes; every process writes each command's exit code and what it printed to OUT.<command>.<RANK>.

Each command runs in a child process, as `torchrun -m opwire ...` would start it (a process that joined and left a
gloo group does not fork sandboxed children safely afterwards), with a rendezvous store of its own: a port next to
the launcher's, served by process 0's child (children of one launch would otherwise meet on the launcher's store
under the same keys)."""

import os
import subprocess
import sys

run, other, out = sys.argv[1:4]
commands = (("ranks", ["ranks", run]), ("diff", ["diff", run, other]), ("replay", ["replay", run]))
for k, (name, argv) in enumerate(commands):
    env = {
        **os.environ,
        "TORCHELASTIC_USE_AGENT_STORE": "False",
        "MASTER_PORT": str(int(os.environ["MASTER_PORT"]) + 1 + k),
    }
    done = subprocess.run([sys.executable, "-m", "opwire", *argv], capture_output=True, text=True, timeout=240, env=env)
    with open(f"{out}.{name}.{os.environ['RANK']}", "w") as f:
        f.write(f"{done.returncode}\n{done.stdout}")
    with open(f"{out}.{name}.{os.environ['RANK']}.err", "w") as f:
        f.write(done.stderr)
