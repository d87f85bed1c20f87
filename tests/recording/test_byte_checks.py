"""A byte check planned ahead (`TraceReader.byte_check`) says equal where the reader's `same_bytes` says so, and
declines everything else to the full check: a replay with planned checks reports what one without reports."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

import opwire
from opwire.proxy_executor.default_policy import DefaultPolicy
from opwire.proxy_executor.exec_policy import ExecPolicy
from opwire.proxy_executor.executor import ProxyExecutor
from opwire.recording import payloads
from opwire.recording.compare import compare_tensor
from opwire.recording.distributed.ahead import Ahead
from opwire.recording.frames import open_source
from opwire.recording.replay_engine import Replayer, ReplayOptions
from opwire.recording.source import StreamSource, TraceSource

_VALUES: dict[str, Callable[[], torch.Tensor]] = {
    "contiguous": lambda: torch.arange(12.0).reshape(3, 4),
    "transposed": lambda: torch.arange(12.0).reshape(3, 4).t(),
    "offset": lambda: torch.arange(20.0)[5:11],
    "strided": lambda: torch.arange(20.0)[::3],
    "zero_stride": lambda: torch.arange(3.0).reshape(3, 1).expand(3, 4),
    "negative_zero": lambda: torch.tensor([0.0, -0.0, 2.0]),
    "nan": lambda: torch.tensor([float("nan"), -float("inf"), 3.0]),
    "int32": lambda: torch.arange(4, dtype=torch.int32),
    "complex": lambda: torch.tensor([1 + 2j, 3 - 1j]),
    "large": lambda: torch.arange(600_000, dtype=torch.float32),  # over the 1 MB read buffer: read in pieces
}


_SAME_SIZE = {torch.float32: torch.int32, torch.int32: torch.float32, torch.complex64: torch.float64}


def _alias_trace(value: torch.Tensor, path: Path) -> str:
    """Record `aten::alias` of `value` into a streamed trace at `path`; the name of its output."""
    with opwire.record(path=path) as trace:
        torch.ops.aten.alias.default(value)
    rec = next(r for r in trace.records if r.target == "aten::alias.default")
    return str(rec.outputs[0].value.name)


def _flipped(t: torch.Tensor, at: int) -> torch.Tensor:
    out = t.clone()
    out.view(-1).view(torch.uint8)[at] ^= 1  # one bit of one byte of its memory (the first or the last element)
    return out


def _candidates(value: torch.Tensor) -> dict[str, Any]:
    """Tensors a replay may give for `value`: itself, a bit flipped, another layout, dtype, wrapper or device."""
    out: dict[str, Any] = {"itself": value, "copy": value.clone(), "not a tensor": 3.0, "none": None}
    if value.is_contiguous() and value.numel():
        out["first bit"], out["last bit"] = (
            _flipped(value, 0),
            _flipped(value, value.element_size() * value.numel() - 1),
        )
    out["contiguous"] = value.contiguous()
    out["wider"] = value.to(torch.complex128 if value.is_complex() else torch.float64)
    out["same bits"] = value.view(_SAME_SIZE[value.dtype])  # the very memory read as another dtype
    out["parameter"] = torch.nn.Parameter(value.clone(), requires_grad=False)  # a subclass: declined to the full path
    out["meta"] = value.to("meta")
    if value.is_complex():
        out["conj"] = value.conj()
    else:
        out["neg"] = value.clone()._neg_view()
    return out


@pytest.mark.parametrize("case", sorted(_VALUES))
@pytest.mark.parametrize("memcmp", [True, False], ids=["memcmp", "copied"])
def test_a_planned_check_holds_where_same_bytes_says_yes(
    case: str, memcmp: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not memcmp:
        monkeypatch.setattr(payloads, "_MEMCMP", None)
        monkeypatch.setattr(payloads, "_MEMCMP_AT", None)
    name = _alias_trace(_VALUES[case](), tmp_path / "t.trace")
    src = open_source(tmp_path / "t.trace")
    plan = src.byte_check(name)
    assert plan is not None
    value = src.load(name)
    want = src.meta(name)
    assert want is not None
    for label, t in _candidates(value).items():
        assert plan.holds(t, True) == src.same_bytes(name, t), label
        if plan.holds(t, False):  # without values, the layout alone: what the full check finds too
            assert compare_tensor(t, want, None, None, False) is None, label
        if type(t) is torch.Tensor and t.device.type == "cpu":
            layout = (t.dtype, t.shape, t.stride(), t.storage_offset())
            assert plan.holds(t, False) == (
                layout == (value.dtype, value.shape, value.stride(), value.storage_offset())
            )
    assert plan.holds(value, True) and not plan.holds(_candidates(value)["wider"], True)


def test_no_plan_where_same_bytes_could_never_say_yes(tmp_path: Path) -> None:
    path = tmp_path / "t.trace"
    with opwire.record(path=path, outputs="digest") as trace:
        torch.tanh(torch.ones(3))
    digest_only = str(trace.records[-1].outputs[0].value.name)
    assert open_source(path).byte_check(digest_only) is None  # compared by its digest
    name = _alias_trace(torch.ones(0), tmp_path / "e.trace")
    src = open_source(tmp_path / "e.trace")
    assert src.byte_check(name) is None and src.byte_check("no such tensor") is None  # nothing to compare
    name = _alias_trace(torch.ones(4), tmp_path / "r.trace")
    src = open_source(tmp_path / "r.trace")
    plan = src.byte_check(name)
    assert isinstance(src, StreamSource) and plan is not None and plan.holds(src.load(name), True)
    src.replace(name, torch.ones(4))
    assert src.byte_check(name) is None and not plan.holds(src.load(name), True)  # replaced: the plan declines


def test_a_file_cut_after_planning_declines_and_the_full_check_reports_it(tmp_path: Path) -> None:
    """Bounds were checked when the file was indexed; a file cut underneath reads short: the plan declines (no
    SIGBUS, no error of its own) and the full path reports the payload unreadable."""
    path = tmp_path / "t.trace"
    name = _alias_trace(torch.arange(300_000, dtype=torch.float32), path)
    src = open_source(path)
    value = src.load(name)
    plan = src.byte_check(name)
    assert plan is not None and plan.holds(value, True)
    os.truncate(path, plan.at + plan.size // 2)
    assert not plan.holds(value, True) and not src.same_bytes(name, value)


def _runner(src: TraceSource) -> Replayer:
    policy = ExecPolicy()
    opts = ReplayOptions(DefaultPolicy.FROM_SCHEMA, "chained", None, None, None, policy)
    return Replayer(src, ProxyExecutor(policy=DefaultPolicy.FROM_SCHEMA, exec_policy=policy), opts)


def _replayed(src: TraceSource, planned: bool) -> tuple[list[tuple[Any, ...]], Replayer]:
    """Every mismatch of a chained replay of `src`, its byte checks planned ahead (`Ahead`) or not."""
    runner = _runner(src)
    ahead = Ahead(src)
    ahead.check(ExecPolicy())
    if planned:
        ahead.warm(runner)
    found: list[tuple[Any, ...]] = []
    runner.free(-1)
    with torch.no_grad():
        for i, rec in enumerate(ahead.records()):
            found += [
                (x.index, x.op, x.output, x.kind, x.detail, x.max_diff, x.where)
                for x in runner.run(i, rec, ahead.walk(i))
            ]
            found.append((i, runner.errors.abs, runner.errors.rel))  # the differences seen within tolerance too
            runner.free(i)
    return found, runner


def _record(path: Path) -> None:
    x = torch.linspace(-1, 1, 32).reshape(4, 8)
    with opwire.record(path=path):
        y = torch.tanh(x) * 2
        z = y.t().mm(y).relu()
        z.sum(dim=0).add_(1)
        y.mul_(0.5).copy_(torch.full((4, 8), -0.0))


def test_planned_checks_decide_the_equal_outputs_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the checks planned, an equal output takes neither the reader's `same_bytes` nor a rebuilt payload."""
    _record(tmp_path / "t.trace")
    src = open_source(tmp_path / "t.trace")
    runner = _runner(src)
    ahead = Ahead(src)
    ahead.check(ExecPolicy())
    ahead.warm(runner)
    assert runner.byte_checks
    asked: list[str] = []
    monkeypatch.setattr(src, "same_bytes", lambda name, t: asked.append(name) or False)
    runner.free(-1)
    with torch.no_grad():
        for i, rec in enumerate(ahead.records()):
            assert runner.run(i, rec, ahead.walk(i)) == []
            runner.free(i)
    assert asked == []


def _input_name(src: TraceSource) -> str:
    """The recorded input of the first call (the linspace every later call depends on)."""
    rec = next(r for r in src.records() if r.target == "aten::tanh.default")
    return str(rec.inputs[0].arg.value.name)


@pytest.mark.parametrize("how", ["equal", "perturbed", "last_bit", "corrupt"])
def test_the_same_reports_with_and_without_planned_checks(how: str, tmp_path: Path) -> None:
    path = tmp_path / "t.trace"
    _record(path)
    if how == "corrupt":  # a payload's bytes changed in the file: unreadable, whatever the replay gives
        data = bytearray(path.read_bytes())
        at = data.find((torch.tanh(torch.linspace(-1, 1, 32)) * 2).numpy().tobytes())
        assert at > 0
        data[at + 9] ^= 0xFF
        path.write_bytes(bytes(data))
    got = {}
    for planned in (True, False):
        src = open_source(path)
        assert isinstance(src, StreamSource)
        if how in ("perturbed", "last_bit"):  # the replay computes other values from a changed input
            x = src.load(_input_name(src))
            src.replace(_input_name(src), x + 0.25 if how == "perturbed" else _flipped(x, 4 * 7))  # lowest bit
        got[planned], runner = _replayed(src, planned)
        assert bool(runner.byte_checks) == planned
    assert got[True] == got[False]
    kinds = {x[3] for x in got[True] if len(x) > 3}
    assert kinds == {"equal": set(), "perturbed": {"value"}, "last_bit": set(), "corrupt": {"missing"}}[how]
    assert any(x[1] > 0 for x in got[True] if len(x) == 3) == (how in ("perturbed", "last_bit"))  # numbers compared
    if how == "corrupt":
        assert all("do not match its SHA-256" in x[4] for x in got[True] if len(x) > 3)
