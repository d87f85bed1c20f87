"""The `cli` fixture: run `opwire` in a child process, as a user does, in the test's temporary directory."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

Cli = Callable[..., "subprocess.CompletedProcess[str]"]


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    """`cli("run", "prog.opw", ..., cwd=None)` -> the finished `python -m opwire.cli` process (text output)."""

    def run(*args: object, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "opwire.cli", *map(str, args)],
            cwd=cwd or tmp_path,
            capture_output=True,
            text=True,
            timeout=600,
        )

    return run
