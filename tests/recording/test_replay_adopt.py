"""Chained replay takes recorded values (of `empty` memory, of writes outside the trace) into live tensors, also
into an `expand` output whose elements share memory, and reports a value it cannot take as an opwire error."""

from __future__ import annotations

import ctypes
import json

import pytest
import torch

import opwire
from opwire.recording.definedness import EXTERNAL, UNDEFINED


def _expanded_empty() -> opwire.Trace:
    with opwire.record() as trace:
        x = torch.empty(2, 1)
        y = x.expand(2, 3)  # stride 0: each element of x three times
        z = y * 2
        del z
    return trace


def test_chained_replay_takes_an_undefined_expand_output() -> None:
    trace = _expanded_empty()
    assert json.loads(trace.records[1].metadata[UNDEFINED])  # the expand is adopted in a chained replay
    for mode in ("chained", "isolated"):
        report = opwire.replay(trace, mode=mode)  # type: ignore[arg-type]
        assert report.ok and report.replayed == 3, (mode, report)


def test_a_value_written_outside_the_trace_reaches_an_expand_view_and_is_compared() -> None:
    with opwire.record() as trace:
        x = torch.empty(2, 1)
        y = x.expand(2, 3)
        data = (ctypes.c_float * 2).from_address(x.data_ptr())
        data[0], data[1] = 7.0, -3.0  # as C++ code writes memory no dispatch mode sees
        z = y * 2
        del z
    mul = trace.records[-1]
    assert json.loads(mul.metadata[EXTERNAL]) and UNDEFINED not in mul.metadata  # its output is compared
    report = opwire.replay(trace, mode="chained")
    assert report.ok and report.replayed == 3, report


def test_a_value_chained_replay_cannot_take_is_an_opwire_error_naming_the_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    trace = _expanded_empty()

    def refuse(self: torch.Tensor, src: torch.Tensor, non_blocking: bool = False) -> torch.Tensor:
        raise RuntimeError("refused by the test\nsecond line")

    monkeypatch.setattr(torch.Tensor, "copy_", refuse)
    report = opwire.replay(trace, mode="chained")
    found = [(m.index, m.op, m.kind) for m in report.mismatches]
    assert found[0] == (1, "aten::expand.default", "error"), report  # the empty itself is rebound, not copied into
    assert "call 1 (aten::expand.default)" in report.mismatches[0].detail
    assert "refused by the test" in report.mismatches[0].detail and "second line" not in report.mismatches[0].detail
