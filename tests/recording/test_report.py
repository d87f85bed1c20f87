"""Replay reports a person can act on: first divergence with its origin, caps, per-op table, tolerances, JSON."""

from __future__ import annotations

import io
import json as _stdlib_json
import math
import re
from pathlib import Path

import pytest
import torch
from support.clirun import run_cli

import opwire
from opwire.errors import DecodeError
from opwire.recording.compare import _compare_values, tolerance
from opwire.recording.progress import Progress
from opwire.recording.replay_worker import report_from_json, worker_report
from opwire.recording.report import Mismatch, OpStats, ReplayReport, Span
from opwire.serde import json


class _Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.act, self.fc2 = torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


def _recorded(path: Path | None) -> tuple[opwire.Trace, int]:
    torch.manual_seed(0)
    model, x = _Net(), torch.randn(4, 6)
    with opwire.record(path=path) as trace:
        model(x).sum().backward()
    i = next(i for i, r in enumerate(trace.records) if r.target == "aten::tanh.default")
    return trace, i


def _tamper(trace: opwire.Trace, i: int, value: float = 0.5) -> None:
    name = trace.records[i].outputs[0].value.name
    bad = trace.tensor(name).clone()
    bad[2, 5] = bad[2, 5] + value if value == value else float("nan")
    trace.set_tensor(name, bad)


@pytest.mark.parametrize("form", ["memory", "stream"])
def test_a_tampered_value_is_one_first_divergence_with_its_source(form: str, tmp_path: Path) -> None:
    trace, i = _recorded(tmp_path / "t.trace" if form == "stream" else None)
    _tamper(trace, i)
    report = opwire.replay(trace, mode="chained", progress=False)
    first = report.first_divergence
    assert first is not None and len(report.mismatches) == 1
    assert (first.index, first.op, first.where) == (i, "aten::tanh.default", (2, 5))
    assert first.module == "_Net.act"
    assert first.source.endswith("in forward") and "test_report.py:" in first.source
    assert first.inputs == (f"self = {trace.records[i].inputs[0].arg.value.name}: output 0 of call {i - 1} "
                            f"aten::addmm.default ({trace.records[i - 1].metadata['source']})",)  # fmt: skip
    text = str(report)
    assert text.splitlines()[1] == f"first divergence: call {i} aten::tanh.default output 0"
    assert "elements differ beyond rtol=1e-05, atol=1e-06" in text
    assert "in module _Net.act" in text
    assert re.search(r"aten::tanh.default\s+1\s+1\s+0.5\s+0.531", text)


def test_mismatches_are_capped_with_the_count_of_the_rest() -> None:
    trace, i = _recorded(None)
    _tamper(trace, i)
    report = opwire.replay(trace, progress=False, max_mismatches=1)
    assert len(report.mismatches) > 2
    text = str(report)
    assert f"mismatches (first 1 of {len(report.mismatches)}):" in text
    assert f"... and {len(report.mismatches) - 1} more" in text
    d = report.to_dict()
    assert len(d["mismatches"]) == len(report.mismatches)
    assert d["first_divergence"]["index"] == i and d["ops"]["aten::tanh.default"]["mismatches"] == 1


def test_nan_differences_are_named() -> None:
    trace, i = _recorded(None)
    _tamper(trace, i, float("nan"))
    first = opwire.replay(trace, progress=False).first_divergence
    assert first is not None and "1 recorded NaN replayed as other values" in first.detail


def test_default_tolerances_follow_the_dtype() -> None:
    assert tolerance(torch.float32, None, None) == (1e-5, 1e-6)
    assert tolerance(torch.float16, None, None)[0] > tolerance(torch.float32, None, None)[0]
    assert tolerance(torch.bfloat16, None, None)[0] > tolerance(torch.float16, None, None)[0]
    assert tolerance(torch.float16, 0.5, None) == (0.5, 1e-5)
    x = torch.randn(8, 8, dtype=torch.float16)
    with opwire.record() as trace:
        x.tanh()
    name = trace.records[0].outputs[0].value.name
    trace.set_tensor(name, trace.tensor(name) * (1 + 4e-4))  # within float16's default, not float32's
    assert opwire.replay(trace, progress=False).ok
    assert not opwire.replay(trace, progress=False, rtol=1e-5, atol=1e-6).ok


def test_str_report_is_what_the_cli_prints(tmp_path: Path) -> None:
    trace, i = _recorded(None)
    _tamper(trace, i)
    path = tmp_path / "t.trace"
    trace.save(path, format="stream")
    report = opwire.replay(path, progress=False, max_mismatches=2)
    cli = run_cli("replay", path, "--max-mismatches", "2", cwd=path.parent)
    assert cli.returncode == 1 and cli.stderr == ""  # not a terminal: no progress bar

    def masked(s: str) -> str:
        return re.sub(r"in \d+\.\d+s", "in Ts", s).strip()

    assert masked(cli.stdout) == masked(str(report))


def test_two_workers_give_the_one_worker_report(tmp_path: Path) -> None:
    trace, i = _recorded(tmp_path / "t.trace")
    _tamper(trace, i)
    one = opwire.replay(trace, progress=False)
    two = opwire.replay(trace, progress=False, workers=2)
    assert two.workers == 2 and one.mismatches == two.mismatches and one.skipped == two.skipped
    assert one.ops == two.ops and one.replayed == two.replayed
    with pytest.raises(ValueError, match="chained"):
        opwire.replay(trace, mode="chained", workers=2)


def test_progress_draws_only_when_asked_or_on_a_terminal() -> None:
    quiet = io.StringIO()
    bar = Progress("replaying", 10, out=quiet)
    bar.update(10)
    bar.close()
    assert quiet.getvalue() == ""  # StringIO is no terminal
    shown = io.StringIO()
    bar = Progress("replaying", 10, enabled=True, out=shown)
    bar._last -= 1
    bar.update(4)
    bar.close()
    assert "replaying 4/10 [############" in shown.getvalue() and "calls/s, ETA" in shown.getvalue()


def test_report_json_is_complete(tmp_path: Path) -> None:
    trace, i = _recorded(None)
    _tamper(trace, i)
    d = _stdlib_json.loads(_stdlib_json.dumps(opwire.replay(trace, progress=False).to_dict()))
    assert {"first_divergence", "ops", "mismatches", "skipped", "cut", "tolerance", "mismatching_calls"} <= d.keys()
    assert d["first_divergence"]["source"] and d["first_divergence"]["inputs"]


def test_worker_report_is_an_idl_record() -> None:
    """A worker hands its parent a `ReplayWorkerReport` in opwire's JSON codec; anything else is a DecodeError."""
    part = ReplayReport("isolated", 5, replayed=3, seconds=0.5)
    part.mismatches = [
        Mismatch(2, "aten::add.Tensor", "output 0", "value", "d", 0.5, (0, 1), 0.25, "a.py:1", "M.fc", ("self = t1",))
    ]
    part.skipped = [(4, "ns::op", "why")]
    part.ops = {"aten::add.Tensor": OpStats(3, 1, 0.5, float("inf"))}
    data = json.encode(worker_report(part))
    back = report_from_json(data)
    assert (back.mismatches, back.skipped, back.ops) == (part.mismatches, part.skipped, part.ops)
    assert (back.mode, back.calls, back.replayed, back.seconds) == ("isolated", 5, 3, 0.5)
    with pytest.raises(DecodeError, match=r"replay worker: .* at `mismatches\[0\]\.index`"):
        report_from_json(data.replace(b'"index": 2', b'"index": "x"'))
    with pytest.raises(DecodeError, match="replay worker"):
        report_from_json(b"Traceback (most recent call last):")
    assert back.spans is None and b'"spans": null' in data  # not split: absent, not an empty list


def test_spans_travel_with_the_worker_report_and_into_the_output_record() -> None:
    """A `--collectives` rank's time split after each c10d call reaches rank 0 and `--json` unchanged."""
    part = ReplayReport("chained", 9, replayed=9, seconds=0.75)
    part.spans = [Span(0, 4, 0.25), Span(4, 7, 0.125), Span(7, 9, 0.375)]
    back = report_from_json(json.encode(worker_report(part)))
    assert back.spans == part.spans
    out = back.to_model()
    assert [(s.start, s.stop, s.seconds) for s in out.spans or []] == [(0, 4, 0.25), (4, 7, 0.125), (7, 9, 0.375)]
    assert "span" not in str(back)  # the printed report is unchanged
    with pytest.raises(DecodeError, match=r"replay worker: .* at `spans\[1\]\.seconds`"):
        report_from_json(json.encode(worker_report(part)).replace(b'"seconds": 0.125', b'"seconds": "x"'))


@pytest.mark.parametrize("shape", [(), (7,), (3, 4), (2, 3, 4), (4, 1, 3, 2)])
def test_a_value_difference_names_the_largest_element_and_the_non_finite_ones(shape: tuple[int, ...]) -> None:
    """Each element in turn the largest difference: its index as `torch.unravel_index` gives it; NaN and infinity
    named only when a side holds one."""
    want = torch.zeros(shape)
    for flat in range(want.numel()):
        got = want.clone()
        got.view(-1)[flat] = 2.0
        where = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), shape))
        d = _compare_values(got, want, 1e-5, 1e-6)
        assert d is not None and d.where == where and d.max_diff == 2.0, (flat, d)
        assert (
            d.detail
            == f"1 of {want.numel()} elements differ beyond rtol=1e-05, atol=1e-06; largest difference 2 at {list(where)}: expected 0.0, got 2.0"
        )
        got.view(-1)[flat] = math.nan
        d = _compare_values(got, want, 1e-5, 1e-6)
        assert d is not None and "(1 NaN where the recording had none)" in d.detail and d.where == where
        d = _compare_values(want, got, 1e-5, 1e-6)
        assert d is not None and "(1 recorded NaN replayed as other values)" in d.detail
