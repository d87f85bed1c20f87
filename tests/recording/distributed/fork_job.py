"""Run by the tests under torchrun: several `opwire` commands in one launch, each as `torchrun -m opwire` runs it.

    torchrun ... fork_job.py COMMANDS.json

COMMANDS.json is a list of {"name": NAME, "argv": [...], "env": {NAME: VALUE}}; each command runs in order in a
child process forked by this process once it imported torch, Dynamo and the CLI, as the tests' CLI fork server
does (tests/support/cli_forkserver.py): the child calls `opwire.cli.main(argv)`, what `torchrun -m opwire ARGV`
runs, in the launcher's environment (RANK, WORLD_SIZE, ...) plus the command's "env". This process itself never
joins a gloo group (one that joined and left one does not fork sandboxed children safely afterwards). Each command
gets a rendezvous store of its own on a port next to the launcher's, served by process 0's child (children of one
launch would otherwise meet on the launcher's store under the same keys). Every process writes each command's
stdout to NAME.<RANK>.out, and its exit code then its stderr to NAME.<RANK>.err; `ran` in distrun.py reads them.

Not for `replay --collectives`: without torchrun's agent store (which outlives the ranks) its ranks hand their
outcomes over a store that process 0's child serves, and that child may leave first ("Connection reset by peer"
in process 1, seen in 1 run of 3)."""

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "support"))
from cli_forkserver import prepare, run_command  # tests/support, beside the CLI fork server

commands = json.loads(Path(sys.argv[1]).read_text())
prepare()
launcher_port = int(os.environ["MASTER_PORT"])
for k, command in enumerate(commands):
    env = {**os.environ, "TORCHELASTIC_USE_AGENT_STORE": "False", "MASTER_PORT": str(launcher_port + 1 + k)}
    env.update(command.get("env", {}))
    log = f"{command['name']}.{os.environ['RANK']}"
    request = {"argv": command["argv"], "cwd": os.getcwd(), "out": f"{log}.out", "err": f"{log}.err", "env": env}
    done = run_command({**request, "timeout": 240})
    code = -1 if done.get("timeout") else done["returncode"]
    Path(f"{log}.err").write_text(f"{code}\n{Path(f'{log}.err').read_text()}")
