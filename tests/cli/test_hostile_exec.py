"""The executing commands over tests/hostile_exec.py: one line on stderr, the documented exit code, no side effect."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from hostile_exec import CASES, Case


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_hostile_file_is_one_line_error_without_side_effect(case: Case, tmp_path: Path) -> None:
    argv = case.build(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "opwire.cli", case.command, *argv], capture_output=True, text=True, timeout=120
    )
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == case.code, proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"opwire {case.command}: error: ")
    assert re.search(case.stderr, lines[0]), lines[0]
    if case.absent is not None:
        assert not (tmp_path / case.absent).exists()
