"""opwire.record: what a trace holds (binding, defaults, tensor names, aliasing, digests) and its files."""

from __future__ import annotations

import json
import warnings

import pytest
import torch
from support import corpus_ops

import opwire
from opwire.errors import OpwireWarning
from opwire.schema import models as m


def _train_step() -> tuple[torch.nn.Module, opwire.Trace]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, y = torch.randn(4, 6), torch.tensor([0, 2, 1, 0])
    with opwire.record() as trace:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    return model, trace


def test_training_step_records_forward_backward_and_optimizer() -> None:
    _, trace = _train_step()
    ops = {r.target for r in trace.records}
    assert {"aten::addmm.default", "aten::relu.default", "aten::threshold_backward.default"} <= ops
    assert any(t.startswith("aten::add_") for t in ops)  # the optimizer's in-place update
    assert set(trace.header.op_schemas) == ops
    assert trace.header.op_schemas["aten::relu.default"] == "aten::relu(Tensor self) -> Tensor"
    assert trace.header.torch_version == torch.__version__
    named = {
        n
        for r in trace.records
        for a in [*(na.arg for na in r.inputs), *r.outputs]
        if a.type == "as_tensor"
        for n in [a.value.name]
    }
    assert named <= set(trace.tensors)


def test_all_arguments_written_by_default_and_only_passed_ones_without() -> None:
    x = torch.randn(3)
    with opwire.record() as full:
        torch.add(x, x)
    with opwire.record(write_defaults=False) as lean:
        torch.add(x, x)
    assert [na.name for na in full.records[0].inputs] == ["self", "other", "alpha"]
    assert full.records[0].inputs[2].arg == m.Argument(as_int=1)
    assert [na.name for na in lean.records[0].inputs] == ["self", "other"]
    # the same tensor read twice is stored once
    assert full.records[0].inputs[0].arg == full.records[0].inputs[1].arg
    assert len(full.tensors) == 2


def test_data_flow_views_and_in_place_writes_keep_their_names() -> None:
    x = torch.arange(6.0)
    with opwire.record() as trace:
        y = x * 2  # t2
        v = y[1:4]  # a view of y
        v.mul_(10)  # writes y's storage through the view
        y.sum()
    mul, sl, mul_, total = trace.records
    assert mul.outputs[0].value.name == "t2"
    assert sl.inputs[0].arg.value.name == "t2"
    view = sl.outputs[0].value.name
    assert mul_.inputs[0].arg.value.name == view
    assert mul_.outputs[0].value.name == f"{view}.1"  # the written view's new value
    assert json.loads(mul_.metadata["mutated"]) == {"self": [f"{view}.1"]}
    assert total.inputs[0].arg.value.name == "t2.1"  # the base read after the write: same object, new value
    assert trace.tensors["t2"].data != trace.tensors["t2.1"].data  # the old value was kept before the write
    sliced = trace.tensors[view]
    assert (sliced.sizes, sliced.strides, sliced.storage_offset) == ([3], [1], 1)


def test_digest_mode_keeps_payloads_only_where_a_later_call_reads_them() -> None:
    x = torch.randn(4, 4)
    with opwire.record(outputs="digest") as trace:
        y = x.exp()
        y.sum()
    exp, total = trace.records
    read_later, final = exp.outputs[0].value.name, total.outputs[0].value.name
    assert trace.tensors[read_later].data and trace.tensors["t1"].data
    tv = trace.tensors[final]
    assert tv.data == b"" and tv.digest is not None
    assert tv.digest.mean == pytest.approx(float(y.sum()))
    assert trace.header.outputs_mode == "digest"


def test_include_and_exclude_filter_ops() -> None:
    x = torch.randn(3)
    with opwire.record(include=["aten::*"], exclude=["aten::sin*"]) as trace:
        x.sin().cos()
    assert [r.target for r in trace.records] == ["aten::cos.default"]
    assert trace.records[0].inputs[0].arg.value.name in trace.tensors  # the unrecorded producer's output is stored


def test_custom_op_with_defaults_of_many_types() -> None:
    corpus_ops.register()
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    with opwire.record() as trace:
        torch.ops.opwire_test.mix(x, y, dtype=torch.float64, c=1.5 - 0.5j)
        torch.ops.opwire_test.tagged(x, [True, False], ["a", "b"], [None, y])
    mix, tagged = trace.records
    args = {na.name: na.arg for na in mix.inputs}
    assert args["weights"] == m.Argument(as_floats=[1.0, 2.0])
    assert args["c"] == m.Argument(as_complex=m.ComplexValue(real=1.5, imag=-0.5))
    assert args["dtype"] == m.Argument(as_scalar_type=m.ScalarType.DOUBLE)
    assert args["device"] == m.Argument(as_none=True)
    assert {na.name: na.kind for na in mix.inputs}["flag"] == m.ArgumentKind.KEYWORD
    extras = {na.name: na.arg for na in tagged.inputs}["extras"]
    assert extras.type == "as_optional_tensors" and extras.value[0].type == "as_none"
    assert tagged.outputs[0].type == "as_tensors"


def test_uncarriable_calls_are_kept_as_skipped_records() -> None:
    x, storage = torch.zeros(3), torch.ones(3).untyped_storage()
    with pytest.warns(OpwireWarning, match=r"^opwire.record: aten::set_.source_Storage is kept as a skipped record"):
        with opwire.record() as trace:
            x.set_(storage)
            x.set_(storage)  # warned once per op
    rec = trace.records[0]
    assert "Storage" in rec.metadata["skipped"] and rec.inputs == []


def test_a_generator_argument_is_recorded_and_marked() -> None:
    gen = torch.Generator().manual_seed(1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", OpwireWarning)
        with opwire.record() as trace:
            torch.rand(3, generator=gen)
    (rec,) = trace.records
    assert rec.target == "aten::rand.generator" and rec.metadata["generator"] == "generator"
    assert {na.name: na.arg.type for na in rec.inputs}["generator"] == "as_none"
    report = opwire.replay(trace, progress=False)
    assert report.ok and report.replayed == 1 and not report.skipped


def test_save_and_load_round_trip(tmp_path: object, fmt: str) -> None:
    _, trace = _train_step()
    path = tmp_path / f"step.{fmt}"  # type: ignore[operator]
    trace.save(path, format=fmt)
    back = opwire.load_trace(path)
    assert back.model == trace.model
    assert repr(back).startswith(f"Trace({len(trace)} calls")


def test_truncated_or_corrupted_traces_are_decode_errors(fmt: str) -> None:
    _, trace = _train_step()
    data = trace.dumps(fmt)
    for bad in (data[: len(data) // 2], data[:-3], b"\x00" * 40, data[:20] + b"\xff" * 50 + data[70:]):
        with pytest.raises(opwire.DecodeError):
            opwire.Trace.loads(bad)


def test_record_rejects_bad_options() -> None:
    with pytest.raises(ValueError, match="outputs must be"), opwire.record(outputs="bytes"):  # type: ignore[arg-type]
        pass
    with pytest.raises(TypeError, match="list of patterns"), opwire.record(include="aten::*"):
        pass
    with opwire.record() as trace:
        with pytest.raises(RuntimeError, match="still being recorded"):
            _ = trace.records


_DYNAMO_PROBE = """
import sys, torch, opwire
from opwire.recording import dispatch_mode
with opwire.record() as trace:
    torch.ones(2).add(1)
print(len(trace.records), "torch._dynamo" in sys.modules, len(dispatch_mode._WITHOUT_DYNAMO))
import torch._dynamo
with opwire.record() as trace:
    torch.ones(2).add(1)
print(len(trace.records), len(dispatch_mode._WITHOUT_DYNAMO))
"""


def test_recording_imports_no_dynamo_and_keeps_it_out_once_loaded() -> None:
    """torch wraps a mode's `__torch_dispatch__` in a Dynamo guard that imports torch._dynamo (2 s) on its first
    call; the recorder guards itself, and only once Dynamo is loaded (nothing compiles before)."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _DYNAMO_PROBE], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["2", "False", "0", "2", "1"]
