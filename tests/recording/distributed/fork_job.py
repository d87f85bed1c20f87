"""Run by the tests under torchrun: several `opwire` commands in one launch, each as `torchrun -m opwire` runs it.

    torchrun ... fork_job.py COMMANDS.json

COMMANDS.json is a list of {"name": NAME, "argv": [...], "env": {NAME: VALUE}}; each command runs in order in a
child process forked by this process once it imported torch, Dynamo and the CLI, as the tests' CLI fork server
does (tests/support/cli_forkserver.py): the child calls `opwire.cli.main(argv)`, what `torchrun -m opwire ARGV`
runs, in the launcher's environment (RANK, WORLD_SIZE, ...) plus the command's "env". This process itself never
joins a gloo group (one that joined and left one does not fork sandboxed children safely afterwards). Each command
gets a rendezvous store of its own, served by process 0's child (children of one launch would otherwise meet on
the launcher's store under the same keys), on a port process 0 asks the kernel for (bind to port 0) right before
that command and hands the others in a file beside the logs (a fixed port next to the launcher's was at times
another socket's: EADDRINUSE, 1 CI run in 3). Every process writes each command's
stdout to NAME.<RANK>.out, and its exit code then its stderr to NAME.<RANK>.err; `ran` in distrun.py reads them.

Not for `replay --collectives`: without torchrun's agent store (which outlives the ranks) its ranks hand their
outcomes over a store that process 0's child serves, and that child may leave first ("Connection reset by peer"
in process 1, seen in 1 run of 3)."""

import json
import os
import socket
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "support"))
from cli_forkserver import prepare, run_command  # tests/support, beside the CLI fork server


def store_port(k: int) -> int:
    """Command k's store port: process 0 takes a free one from the kernel and writes it (atomically) for the others,
    which wait for it."""
    path = Path(f"fork_job.port.{os.environ['TORCHELASTIC_RUN_ID']}.{k}")
    if os.environ["RANK"] == "0":
        with socket.socket() as s:
            s.bind((os.environ.get("MASTER_ADDR", "127.0.0.1"), 0))
            port = s.getsockname()[1]
        Path(f"{path}.tmp").write_text(str(port))
        os.replace(f"{path}.tmp", path)
        return port
    deadline = time.monotonic() + 240
    while not path.exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"fork_job: process 0 wrote no store port for command {k}")
        time.sleep(0.01)
    return int(path.read_text())


commands = json.loads(Path(sys.argv[1]).read_text())
prepare()
for k, command in enumerate(commands):
    env = {**os.environ, "TORCHELASTIC_USE_AGENT_STORE": "False", "MASTER_PORT": str(store_port(k))}
    env.update(command.get("env", {}))
    log = f"{command['name']}.{os.environ['RANK']}"
    request = {"argv": command["argv"], "cwd": os.getcwd(), "out": f"{log}.out", "err": f"{log}.err", "env": env}
    done = run_command({**request, "timeout": 240})
    code = -1 if done.get("timeout") else done["returncode"]
    Path(f"{log}.err").write_text(f"{code}\n{Path(f'{log}.err').read_text()}")
