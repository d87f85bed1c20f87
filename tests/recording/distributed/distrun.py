"""Running opwire under torchrun in a child process (2 gloo ranks), for the distributed tests."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from support.clirun import run_module

__all__ = ["JOB", "RECORD_JOB", "SHARE_JOB", "torchrun"]

JOB = Path(__file__).with_name("collectives_job.py")
RECORD_JOB = Path(__file__).with_name("record_job.py")
SHARE_JOB = Path(__file__).with_name("share_job.py")
_ROOT = Path(__file__).resolve().parents[3]


def torchrun(
    *args: object, cwd: Path, timeout: float = 300, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`torchrun --standalone --nproc-per-node 2 -m opwire ARGS` in `cwd` (this checkout's opwire first); ARGS
    starting with a `.py` script run that script instead."""
    full = {**os.environ, **(env or {})}
    full["PYTHONPATH"] = os.pathsep.join([str(_ROOT), *filter(None, [full.get("PYTHONPATH")])])
    full.setdefault("OMP_NUM_THREADS", "1")
    cmd = ["--standalone", "--nproc-per-node", "2"]
    if not str(args[0]).endswith(".py"):  # a script runs as itself, anything else as `-m opwire ARGS`
        cmd += ["-m", "opwire"]
    # the launcher forked from the CLI fork server (torch imported once per worker); the ranks start fresh
    return run_module("torch.distributed.run", *cmd, *args, cwd=cwd, env=full, timeout=timeout)
