"""A cut or empty trace is a failure for `opwire replay`: exit 2, saying what is missing."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from support.clirun import Cli

import opwire


def _trace(path: Path) -> bytes:
    with opwire.record(path=path):
        torch.ones(4).add(1).mul(2).sum()
    return path.read_bytes()


def test_cut_and_empty_traces_exit_2(cli: Cli, tmp_path: Path) -> None:
    data = _trace(tmp_path / "full.trace")
    (tmp_path / "cut.trace").write_bytes(data[: len(data) - 3])
    done = cli("replay", "cut.trace")
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith("opwire replay: error: cut.trace is incomplete: the trace is cut at byte")
    assert len(done.stderr.strip().splitlines()) == 1
    with opwire.record() as empty:
        pass
    empty.save(tmp_path / "empty.trace")
    done = cli("replay", "empty.trace")
    assert done.returncode == 2
    assert "empty.trace is incomplete: the trace holds no calls" in done.stderr


def test_the_api_says_the_same(tmp_path: Path) -> None:
    data = _trace(tmp_path / "full.trace")
    (tmp_path / "cut.trace").write_bytes(data[: len(data) - 3])
    report = opwire.replay(opwire.load_trace(tmp_path / "cut.trace"), progress=False)
    assert not report.complete and report.missing is not None and "cut at byte" in report.missing
    with opwire.record() as empty:
        pass
    report = opwire.replay(empty, progress=False)
    assert not report.complete and "holds no calls" in str(report.missing)
    assert report.to_dict()["complete"] is False


def test_workers_are_chosen_for_the_trace_size(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from opwire.cli import main
    from opwire.cli.replay_cmd import CALLS_PER_WORKER, auto_workers

    assert auto_workers(10, 8) == 1
    assert auto_workers(3 * CALLS_PER_WORKER, 8) == 3
    assert auto_workers(100 * CALLS_PER_WORKER, 2) == 2
    _trace(tmp_path / "small.trace")
    assert main(["replay", str(tmp_path / "small.trace")]) == 0
    out, err = capsys.readouterr()
    assert "workers" not in out and err == ""
    assert main(["replay", str(tmp_path / "small.trace"), "--workers", "2"]) == 0
    err = capsys.readouterr().err
    assert err.startswith("opwire replay: note: 2 workers for ")
    assert "one worker is faster (drop --workers for the automatic choice)" in err
