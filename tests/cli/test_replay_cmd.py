"""`opwire replay`: exit 0 without mismatches, 1 with them, 2 for unreadable traces; --json for machines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import opwire
from opwire.cli import main
from opwire.schema import models as m
from opwire.serde import tensors
from opwire.validation import CODES


def _trace(tmp_path: Path, tamper: bool = False) -> str:
    x = torch.randn(3, 3)
    with opwire.record() as trace:
        (x @ x).tanh()
    if tamper:
        name = trace.records[1].outputs[0].value.name
        trace.tensors[name] = tensors.from_tensor(tensors.to_tensor(trace.tensors[name]) + 1.0)
    path = tmp_path / "t.trace"
    trace.save(path)
    return str(path)


def test_clean_trace_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", _trace(tmp_path), "--chained"]) == 0
    assert "replayed 2 of 2 calls (chained)" in capsys.readouterr().out


def test_mismatch_exits_1_with_json_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", _trace(tmp_path, tamper=True), "--json", "--atol", "1e-3", "--rtol", "0"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is False
    (bad,) = report["mismatches"]
    assert (bad["index"], bad["op"], bad["kind"]) == (1, "aten::tanh.default", "value")
    assert bad["max_diff"] == pytest.approx(1.0, rel=1e-5)
    (finding,) = report["findings"]  # the one Finding shape of validation and node comparison
    got = m.Finding(**{k: v for k, v in finding.items() if k != "differences"})
    assert (got.code, got.severity, got.op) == ("replay_mismatch", "error", "aten::tanh.default")
    assert got.message.startswith("call 1 aten::tanh.default output 0: value mismatch: ")
    assert got.fix == CODES["replay_mismatch"].fix
    (difference,) = finding["differences"]
    assert difference["kind"] == "value" and difference["max_diff"] == pytest.approx(1.0, rel=1e-5)


def test_tolerance_flags_apply(tmp_path: Path) -> None:
    assert main(["replay", _trace(tmp_path, tamper=True), "--atol", "2"]) == 0


@pytest.mark.parametrize("content", [b"", b"{not json", b"\x89OPWIRE\n\x01C"])
def test_unreadable_trace_exits_2(tmp_path: Path, content: bytes, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.trace"
    path.write_bytes(content)
    assert main(["replay", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("opwire replay: error:") and err.count("\n") == 1
