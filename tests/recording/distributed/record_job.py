"""Run by the tests under torchrun: one job recorded by `opwire record` several times in one launch.

    torchrun ... record_job.py JOB OUT[:NAME=VALUE,...] ...

Each OUT is the run directory of one `opwire record --out OUT -- python JOB` (with NAME=VALUE added to its
environment), run in order in a child process forked by this process once it imported torch and the CLI, as
share_job.py runs its commands: the child calls `opwire.cli.main(argv)`, what `torchrun -m opwire record ...` runs,
with the launcher's RANK, WORLD_SIZE and the rest of its environment. Each recording gets a rendezvous store of its
own on a port next to the launcher's (served by process 0's child). Every process writes each recording's exit
code and what it printed on stderr to OUT.<RANK>.err."""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "support"))
from cli_forkserver import prepare, run_command  # tests/support, beside the CLI fork server

job, specs = sys.argv[1], sys.argv[2:]
prepare()
launcher_port = int(os.environ["MASTER_PORT"])
for k, spec in enumerate(specs):
    out, _, extra = spec.partition(":")
    env = {**os.environ, "TORCHELASTIC_USE_AGENT_STORE": "False", "MASTER_PORT": str(launcher_port + 1 + k)}
    env.update(item.split("=", 1) for item in extra.split(",") if item)
    log = f"{out}.{os.environ['RANK']}"
    argv = ["record", "--out", out, "--", "python", job]
    request = {"argv": argv, "cwd": os.getcwd(), "out": f"{log}.out", "err": f"{log}.err", "env": env, "timeout": 240}
    done = run_command(request)
    code = -1 if done.get("timeout") else done["returncode"]
    Path(f"{log}.err").write_text(f"{code}\n{Path(f'{log}.err').read_text()}")
