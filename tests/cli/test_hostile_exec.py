"""The executing commands over tests/support/hostile_exec.py: one line on stderr, the documented exit code, no side effect.

Every case runs as its own process under RLIMIT_AS (an attack that allocates past the budget dies there
instead of passing), forked by the CLI fork server (tests/support/hostile_driver.py), which imported torch once, so the
table costs one torch import, not one per case.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from support.hostile_driver import run_jobs
from support.hostile_exec import CASES, Case

pytestmark = pytest.mark.xdist_group("hostile_exec")  # the module-scoped fixture is built once, on one worker


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[dict[str, Any], Path]]:
    """Build every case in a directory of its own and run them all through the driver."""
    root = tmp_path_factory.mktemp("hostile_exec")
    jobs, dirs = [], []
    for i, case in enumerate(CASES):
        d = root / f"case{i}"
        d.mkdir()
        argv = case.build(d)
        jobs.append(
            {"argv": [case.command, *argv], "cwd": str(d), "out": str(d / "_stdout"), "err": str(d / "_stderr")}
        )
        dirs.append(d)
    results = run_jobs(jobs)
    return {case.name: (result, d) for case, result, d in zip(CASES, results, dirs, strict=True)}


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_hostile_file_is_one_line_error_without_side_effect(
    case: Case, outcomes: dict[str, tuple[dict[str, Any], Path]]
) -> None:
    result, d = outcomes[case.name]
    stderr = (d / "_stderr").read_text(errors="replace")
    assert not result["hung"], f"{case.name}: `opwire {case.command}` hung"
    assert "signal" not in result, f"{case.name}: died of signal {result.get('signal')}"
    assert result["exit"] == case.code, stderr
    assert "Traceback" not in stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith(f"opwire {case.command}: error: ")
    assert re.search(case.stderr, lines[0]), lines[0]
    if case.absent is not None:
        assert not (d / case.absent).exists()
