"""Running `opwire` in a child process, as a user does: the `cli` fixture of tests/conftest.py."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

__all__ = ["Cli", "run_cli"]

Cli = Callable[..., "subprocess.CompletedProcess[str]"]


def run_cli(*args: object, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The finished `python -m opwire.cli ARGS` process, run in `cwd` (text output)."""
    return subprocess.run(
        [sys.executable, "-m", "opwire.cli", *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=600
    )
