"""opwire.diff_traces: recordings of the same code aligned call by call; changed ops, arguments and values found."""

from __future__ import annotations

from pathlib import Path

import torch

import opwire
from opwire.recording.trace_diff import CallDifference


def _script(
    tmp_path: Path, name: str, act: str = "relu", alpha: float = 1.0, seed: int = 0, extra: bool = False
) -> Path:
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Linear(8, 3))
    x = torch.randn(4, 6)
    path = tmp_path / name
    with opwire.record(path=path):
        h = model[0](x)
        h = getattr(torch, act)(h)
        if extra:
            h = h * 1.0
        y = torch.add(model[1](h), 1.0, alpha=alpha)
        y.sum().backward()
    return path


def test_the_same_script_recorded_twice_agrees(tmp_path: Path) -> None:
    d = opwire.diff_traces(_script(tmp_path, "a"), _script(tmp_path, "b"))
    assert d.ok and d.first_divergence is None and d.matched == d.a_calls == d.b_calls
    assert "the traces agree" in str(d)


def test_a_changed_op_is_found(tmp_path: Path) -> None:
    d = opwire.diff_traces(_script(tmp_path, "a"), _script(tmp_path, "b", act="sigmoid"))
    assert not d.ok
    assert any(o.op == "aten::relu.default" for o in d.only_a)
    assert any(o.op == "aten::sigmoid.default" for o in d.only_b)
    first = d.first_divergence
    assert first is not None and first.op in ("aten::relu.default", "aten::sigmoid.default")
    assert "test_trace_diff.py:" in first.source
    assert "first local divergence: only in" in str(d)


def test_an_inserted_call_does_not_shift_the_rest(tmp_path: Path) -> None:
    d = opwire.diff_traces(_script(tmp_path, "a"), _script(tmp_path, "b", extra=True))
    # h * 1.0 adds a mul in forward and one in backward; nothing else moves
    assert [o.op for o in d.only_b] == ["aten::mul.Tensor", "aten::mul.Tensor"] and not d.only_a
    assert d.matched == d.a_calls
    assert not [x for x in d.differences if x.kind == "argument"]


def test_changed_arguments_and_values_are_reported_per_op(tmp_path: Path) -> None:
    d = opwire.diff_traces(_script(tmp_path, "a"), _script(tmp_path, "b", alpha=2.0))
    args = [x for x in d.differences if x.kind == "argument"]
    assert args and args[0].op == "aten::add.Tensor" and args[0].what == "argument alpha"
    assert "as_float=1.0" in args[0].detail and "as_float=2.0" in args[0].detail
    assert d.ops["aten::add.Tensor"].arg_diffs == 1
    seeded = opwire.diff_traces(_script(tmp_path, "c"), _script(tmp_path, "d", seed=1))
    first = seeded.first_divergence
    assert first is not None and first.kind == "value"
    assert seeded.ops[first.op].value_diffs >= 1 and seeded.ops[first.op].worst_abs > 0
    assert "per op (ops with differences):" in str(seeded)
    assert seeded.to_dict()["first_divergence"]["difference"]["kind"] == "value"  # TraceDivergence: one member set


def test_each_difference_is_labelled_local_or_inherited(tmp_path: Path) -> None:
    a = opwire.load_trace(_script(tmp_path, "a"))
    b = opwire.load_trace(_script(tmp_path, "b", seed=1))  # other random inputs: every value differs, inherited
    relu = next(r for r in b.records if r.target == "aten::relu.default")
    name = relu.outputs[0].value.name
    b.set_tensor(name, b.tensor(name) * 3 + 1)  # as if relu's kernel had computed something else in B
    for isolate in (False, True):
        d = opwire.diff_traces(a, b, isolate=isolate)
        first, local = d.first_divergence, d.first_local
        assert first is not None and local is not None and first is not local
        assert isinstance(first, CallDifference) and first.origin == "inherited", str(d)
        assert isinstance(local, CallDifference) and (local.op, local.origin) == ("aten::relu.default", "local")
        assert {x.origin for x in d.differences} == {"local", "inherited"}
        text = str(d)
        assert text.splitlines()[1] == f"first local divergence: {local}"
        assert f"first divergence: inherited: {first}" in text
        assert d.to_dict()["first_local"]["difference"]["origin"] == "local"
