"""What a `--collectives` rank prepares before its loop: the same records, nodes and errors as the loop alone."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import opwire
from opwire.errors import BindError
from opwire.proxy_executor.default_policy import DefaultPolicy
from opwire.proxy_executor.exec_policy import ExecPolicy
from opwire.proxy_executor.executor import ProxyExecutor
from opwire.recording.distributed.ahead import Ahead
from opwire.recording.frames import open_source
from opwire.recording.replay_engine import Replayer, ReplayOptions
from opwire.recording.source import ModelSource, TraceSource
from opwire.schema import models as m


def _runner(src: TraceSource) -> Replayer:
    policy = ExecPolicy()
    opts = ReplayOptions(DefaultPolicy.FROM_SCHEMA, "chained", None, None, None, policy)
    return Replayer(src, ProxyExecutor(policy=DefaultPolicy.FROM_SCHEMA, exec_policy=policy), opts)


def _replayed(src: TraceSource, ahead: Ahead | None) -> list[tuple[int, str, str, str]]:
    """Every mismatch of a chained replay of `src` (shapes from `ahead` where given)."""
    runner = _runner(src)
    if ahead is not None:
        ahead.warm(runner)
    found = []
    runner.free(-1)
    with torch.no_grad():
        for i, rec in enumerate(ahead.records() if ahead is not None else src.records()):
            found += runner.run(i, rec, ahead.walk(i) if ahead is not None else None)
            runner.free(i)
    return [(x.index, x.op, x.kind, x.detail) for x in found]


def _record(path: Path) -> None:
    x = torch.linspace(-1, 1, 32).reshape(4, 8)
    with opwire.record(path=path):
        y = torch.tanh(x) * 2
        z = y.t().mm(y).relu()
        z.sum(dim=0).add_(1)


@pytest.mark.parametrize("limit", [0, 2, 1000])
def test_the_loop_reads_the_same_records_and_replays_them_alike(limit: int, tmp_path: Path) -> None:
    _record(tmp_path / "t.trace")
    src = open_source(tmp_path / "t.trace")
    ahead = Ahead(src, limit)
    ahead.check(ExecPolicy())
    assert len(ahead.kept) == min(limit, len(src))
    assert [r.model_dump() for r in ahead.records()] == [src.record(i).model_dump() for i in range(len(src))]
    assert _replayed(src, ahead) == _replayed(open_source(tmp_path / "t.trace"), None) == []
    assert [s is not None for s in ahead.walks] == [True] * len(ahead.kept)
    assert ahead.walk(len(src) + 5) is None


def test_the_policy_check_still_refuses_before_anything_runs(tmp_path: Path) -> None:
    """A refused op anywhere in the trace, also past the records kept, is the policy check's BindError."""
    with opwire.record() as trace:
        torch.tanh(torch.ones(3)).mul(2)
    model = trace.model
    model.records[-1] = model.records[-1].model_copy(update={"target": "aten::from_file.default"})
    ahead = Ahead(ModelSource(model), 1)
    with pytest.raises(BindError, match="aten::from_file is refused"):
        ahead.check(ExecPolicy())


def test_a_node_that_does_not_bind_is_reported_at_its_call_as_without_ahead(tmp_path: Path) -> None:
    """A record whose node cannot be bound is left to the loop: the same error mismatch at the same call."""
    with opwire.record() as trace:
        torch.tanh(torch.ones(3)).mul(2)
    model = trace.model
    bad = model.records[-1]
    broken = bad.model_copy(update={"inputs": [*bad.inputs, m.NamedArgument(name="bogus", arg=m.Argument(as_int=3))]})
    model.records[-1] = broken
    with_ahead = Ahead(ModelSource(model))
    with_ahead.check(ExecPolicy())
    got = _replayed(ModelSource(model), with_ahead)
    assert with_ahead.walks[-1] is None
    assert got == _replayed(ModelSource(model), None)
    assert [(i, kind) for i, _, kind, _ in got] == [(len(model.records) - 1, "error")]
