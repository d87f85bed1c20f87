"""The executing commands over tests/hostile_exec.py: one line on stderr, the documented exit code, no side effect."""

from __future__ import annotations

import re
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from hostile_exec import CASES, Case

MEMORY_CAP = 3 << 30  # address space of the command: torch's import alone maps about 1 GiB


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_hostile_file_is_one_line_error_without_side_effect(case: Case, tmp_path: Path) -> None:
    argv = case.build(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "opwire.cli", case.command, *argv],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_limit_memory,  # an attack that allocates past the budget would die here, not pass
    )
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == case.code, proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"opwire {case.command}: error: ")
    assert re.search(case.stderr, lines[0]), lines[0]
    if case.absent is not None:
        assert not (tmp_path / case.absent).exists()
