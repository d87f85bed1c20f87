"""opwire.replay: zero mismatches on honest traces, the exact mismatch on tampered ones, schema drift."""

from __future__ import annotations

import json

import pytest
import torch
from support import corpus_ops

import opwire
from opwire.errors import OpwireWarning, UnknownTargetError
from opwire.recording.replayer import ReplayReport
from opwire.schema import models as m
from opwire.serde import tensors


def _train_step(optimizer: str = "adam") -> opwire.Trace:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    params = model.parameters()
    opt = torch.optim.Adam(params, lr=0.01) if optimizer == "adam" else torch.optim.SGD(params, lr=0.1, momentum=0.9)
    x, y = torch.randn(4, 6), torch.tensor([0, 2, 1, 0])
    with opwire.record() as trace:
        for _ in range(2):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
    return trace


def _custom_model() -> opwire.Trace:
    corpus_ops.register()
    x, y, acc = torch.randn(3, 4), torch.randn(3, 4), torch.zeros(4)
    with opwire.record() as trace:
        a = torch.ops.opwire_test.mix(x, y)
        b = torch.ops.opwire_test.mix(a, None, 2.5, 3, flag=False, mode="max", dims=[0, 1], weights=[0.5, 2.0])
        (d,) = torch.ops.opwire_test.tagged(b, [True, False], ["keep", "x"], [None, y])
        torch.ops.opwire_test.accumulate_(acc, d.sum(dim=0))
        (acc * 2).relu()
    return trace


@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_training_step_replays_without_mismatch(replay_mode: str, optimizer: str) -> None:
    trace = opwire.Trace.loads(_train_step(optimizer).dumps("compact"))
    report = opwire.replay(trace, policy="require_serialized", mode=replay_mode)  # type: ignore[arg-type]
    assert report.ok, str(report)
    assert report.replayed == len(trace) and not report.schema_drift and not report.skipped


def test_custom_op_model_replays_without_mismatch(replay_mode: str) -> None:
    trace = _custom_model()
    assert "opwire_test::accumulate_.default" in trace.header.op_schemas
    report = opwire.replay(opwire.Trace.loads(trace.dumps("json")), mode=replay_mode)  # type: ignore[arg-type]
    assert report.ok, str(report)


def _first(trace: opwire.Trace, target: str) -> tuple[int, m.CallRecord]:
    return next((i, r) for i, r in enumerate(trace.records) if r.target == target)


def test_tampered_payload_is_reported_exactly() -> None:
    trace = _custom_model()
    i, rec = _first(trace, "opwire_test::tagged.default")
    name = rec.outputs[0].value[0].name
    t = tensors.to_tensor(trace.tensors[name])
    t[1, 2] += 0.5
    trace.tensors[name] = tensors.from_tensor(t)
    report = opwire.replay(trace)
    # isolated: the producer differs from its payload, and the consumer (sum) fed with the payload differs too
    bad, consumer = report.mismatches
    assert (consumer.index, consumer.op, consumer.kind) == (i + 1, "aten::sum.dim_IntList", "value")
    assert (bad.index, bad.op, bad.kind, bad.where) == (i, "opwire_test::tagged.default", "value", (1, 2))
    assert bad.max_diff == pytest.approx(0.5, rel=1e-5)
    assert bad.output == "output 0[0]"
    assert "1 of 12 elements differ" in bad.detail
    # chained: later calls read the replayed value, so only the producer differs
    chained = opwire.replay(trace, mode="chained")
    assert [(x.index, x.kind) for x in chained.mismatches] == [(i, "value")]


def test_tampered_argument_is_reported_as_its_call_output() -> None:
    trace = _custom_model()
    i, rec = _first(trace, "opwire_test::mix.default")
    alpha = next(na for na in rec.inputs if na.name == "alpha")
    alpha.arg = m.Argument(as_float=0.75)  # the recorded default was 0.5
    report = opwire.replay(trace)
    assert [(x.index, x.output, x.kind) for x in report.mismatches] == [(i, "output 0", "value")]


@pytest.mark.parametrize(
    ("field", "value", "kind"),
    [("dtype", m.ScalarType.DOUBLE, "dtype"), ("sizes", [12], "shape"), ("strides", [1, 3], "stride")],
)
def test_metadata_differences_have_their_kind(field: str, value: object, kind: str) -> None:
    x = torch.randn(3, 4)
    with opwire.record() as trace:
        x.relu()
    name = trace.records[0].outputs[0].value.name
    setattr(trace.tensors[name], field, value)
    (bad,) = opwire.replay(trace).mismatches
    assert bad.kind == kind


def test_in_place_writes_are_compared() -> None:
    corpus_ops.register()
    acc = torch.zeros(4)
    with opwire.record() as trace:
        torch.ops.opwire_test.accumulate_(acc, torch.ones(4))
    _, rec = _first(trace, "opwire_test::accumulate_.default")
    (after,) = json.loads(rec.metadata["mutated"])["acc"]
    trace.tensors[after] = tensors.from_tensor(torch.full((4,), 2.0))
    (bad,) = opwire.replay(trace).mismatches
    assert bad.output == "argument acc (written in place)" and bad.kind == "value"


def test_integers_compare_exactly_and_floats_within_tolerance() -> None:
    x = torch.tensor([1.0, 2.0, 3.0])
    with opwire.record() as trace:
        x.argmax()
        x * 1.0
    argmax_out = trace.records[0].outputs[0].value.name
    mul_out = trace.records[1].outputs[0].value.name
    trace.tensors[mul_out] = tensors.from_tensor(x + 1e-4)
    assert opwire.replay(trace, rtol=0, atol=1e-3).ok
    assert [b.kind for b in opwire.replay(trace, rtol=0, atol=1e-6).mismatches] == ["value"]
    trace.tensors[argmax_out] = tensors.from_tensor(torch.tensor(1))
    bad = opwire.replay(trace, atol=10).mismatches
    assert [(b.index, b.max_diff) for b in bad] == [(0, 1.0)]


def test_digest_traces_replay_and_detect_changes() -> None:
    x = torch.randn(8, 8)
    with opwire.record(outputs="digest") as trace:
        x.exp().sum(dim=1)
    assert opwire.replay(trace).ok
    assert opwire.replay(trace, mode="chained").ok
    name = trace.records[-1].outputs[0].value.name
    trace.tensors[name].digest.sha256 = "0" * 64  # type: ignore[union-attr]
    trace.tensors[name].digest.mean += 1.0  # type: ignore[union-attr,operator]
    (bad,) = opwire.replay(trace).mismatches
    assert bad.kind == "value" and "digest differs" in bad.detail


def test_schema_drift_of_a_redefined_custom_op() -> None:
    def define(default: float) -> torch.library.Library:
        lib = torch.library.Library("opwire_drift", "DEF")
        lib.define(f"scale(Tensor x, float factor={default}) -> Tensor")
        lib.impl("scale", lambda x, factor=default: x * factor, "CompositeExplicitAutograd")
        return lib

    lib = define(2.0)
    try:
        x = torch.randn(3)
        with opwire.record(write_defaults=False) as trace:
            torch.ops.opwire_drift.scale(x)
        assert opwire.replay(trace).ok
    finally:
        lib._destroy()
    lib = define(3.0)
    try:
        report = opwire.replay(trace)
        (drift,) = report.schema_drift
        assert drift.op == "opwire_drift::scale.default"
        assert "factor=2." in drift.recorded and drift.current is not None and "factor=3." in drift.current
        assert [b.kind for b in report.mismatches] == ["value"]  # FROM_SCHEMA took the new default
        strict = opwire.replay(trace, policy="require_serialized")
        (bad,) = strict.mismatches
        assert bad.kind == "error" and "REQUIRE_SERIALIZED" in bad.detail and "'factor'" in bad.detail
    finally:
        lib._destroy()
    # an op no longer loaded is a setup error before anything runs, not a mismatch
    with pytest.raises(UnknownTargetError, match=r"op opwire_drift::scale.default is not loaded in this process"):
        opwire.replay(trace)


def test_report_renders_and_serializes() -> None:
    trace = _custom_model()
    report = opwire.replay(trace)
    assert isinstance(report, ReplayReport) and report.ok
    d = report.to_dict()
    assert json.loads(json.dumps(d))["ok"] is True and d["calls"] == len(trace)
    assert str(report).startswith(f"replayed {len(trace)} of {len(trace)} calls (isolated)")
    with pytest.raises(ValueError, match="mode must be"):
        opwire.replay(trace, mode="both")  # type: ignore[arg-type]


def test_skipped_calls_are_reported_not_replayed() -> None:
    x, storage = torch.zeros(2), torch.ones(2).untyped_storage()
    with pytest.warns(OpwireWarning, match="will not replay"), opwire.record() as trace:
        x.set_(storage)
    report = opwire.replay(trace)
    assert report.replayed == 0 and report.skipped[0][1] == "aten::set_.source_Storage"
