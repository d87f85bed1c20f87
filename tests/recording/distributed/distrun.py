"""Running opwire under torchrun in a child process (2 gloo ranks), for the distributed tests."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import NamedTuple

from support.clirun import run_module

__all__ = ["FORK_JOB", "JOB", "Ran", "ran", "torchrun", "torchrun_forked"]

JOB = Path(__file__).with_name("collectives_job.py")
FORK_JOB = Path(__file__).with_name("fork_job.py")
_ROOT = Path(__file__).resolve().parents[3]


def torchrun(
    *args: object, cwd: Path, timeout: float = 300, env: dict[str, str] | None = None, fresh: bool = False
) -> subprocess.CompletedProcess[str]:
    """`torchrun --standalone --nproc-per-node 2 -m opwire ARGS` in `cwd` (this checkout's opwire first); ARGS
    starting with a `.py` script run that script instead. The ranks are forks of the launcher (torch imported once
    per test worker, tests/support/forked_ranks.py), or, with `fresh`, fresh interpreters as torchrun starts them."""
    full = {**os.environ, **(env or {})}
    full["PYTHONPATH"] = os.pathsep.join([str(_ROOT), *filter(None, [full.get("PYTHONPATH")])])
    full.setdefault("OMP_NUM_THREADS", "1")
    cmd = ["--standalone", "--nproc-per-node", "2"]
    if not str(args[0]).endswith(".py"):  # a script runs as itself, anything else as `-m opwire ARGS`
        cmd += ["-m", "opwire"]
    # the launcher forked from the CLI fork server (torch imported once per worker)
    return run_module("torch.distributed.run", *cmd, *args, cwd=cwd, env=full, timeout=timeout, fork_ranks=not fresh)


class Ran(NamedTuple):
    """One process's run of a command of `torchrun_forked`: its exit code (-1: timed out) and what it printed."""

    returncode: int
    stdout: str
    stderr: str


def torchrun_forked(
    commands: list[tuple[str, list[object], dict[str, str]]], cwd: Path, timeout: float = 300
) -> dict[str, list[Ran]]:
    """Each (NAME, ARGV, ENV) of `commands` as `torchrun ... -m opwire ARGV` (ENV added) runs it, in order, in one
    launch of FORK_JOB (2 processes, forks of the launcher, each forking the commands from itself); NAME -> what
    each process's command did, by rank."""
    spec = [{"name": name, "argv": [str(a) for a in argv], "env": env} for name, argv, env in commands]
    (cwd / "fork_job.json").write_text(json.dumps(spec))
    done = torchrun(FORK_JOB, cwd / "fork_job.json", cwd=cwd, timeout=timeout)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    return {name: [ran(cwd, name, rank) for rank in (0, 1)] for name, _, _ in commands}


def ran(cwd: Path, name: str, rank: int) -> Ran:
    """What command NAME of a `torchrun_forked` launch in `cwd` did in process `rank`."""
    code, _, stderr = (cwd / f"{name}.{rank}.err").read_text().partition("\n")
    return Ran(int(code), (cwd / f"{name}.{rank}.out").read_text(), stderr)
