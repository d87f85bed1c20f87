"""Values with no defined content are never compared; writes no dispatch mode sees are found and kept.

`empty` memory holds whatever was there: two runs (or a run and its replay) disagree on it by chance. DDP
allocates its gradient buckets with `empty`, takes views of them, and fills an int64 `empty` through a raw
pointer before its first collective. These tests make the same moves on one process: a partial write, a view,
a copy, and a write through `ctypes` that no dispatch mode sees.
"""

from __future__ import annotations

import ctypes
import json

import pytest
import torch

import opwire
from opwire.errors import DecodeError
from opwire.recording.compare import reproducible
from opwire.recording.definedness import EXTERNAL, UNDEFINED, Definedness, metadata_names


def _poke(t: torch.Tensor, value: float) -> None:
    """Write `value` into every element of float32 `t` through its data pointer, as C++ code does."""
    data = (ctypes.c_float * t.numel()).from_address(t.data_ptr())
    for k in range(t.numel()):
        data[k] = value


def _script() -> opwire.Trace:
    with opwire.record() as trace:
        bucket = torch.empty(6)
        first, second = bucket[:3], bucket[3:]
        early = first * 2  # computed from undefined memory
        first.copy_(torch.ones(3))
        half = bucket.sum()  # half of it written: still undefined
        second.fill_(2.0)
        whole = bucket.sum()  # every byte written from defined values
        outside = torch.empty(2)
        _poke(outside, 7.0)  # a write no dispatch mode sees
        seen = outside + 1
        drawn = torch.empty(3).sum().item()
        del early, half, whole, seen, drawn
    return trace


def _marks(trace: opwire.Trace) -> list[tuple[str, list[str], list[str]]]:
    return [
        (r.target, sorted(json.loads(r.metadata.get(UNDEFINED, "[]"))), json.loads(r.metadata.get(EXTERNAL, "[]")))
        for r in trace.records
    ]


def test_undefined_memory_and_outside_writes_are_marked_where_they_happen() -> None:
    trace = _script()
    marks = _marks(trace)
    targets = [t for t, _, _ in marks]
    at = {t: k for k, t in reversed(list(enumerate(targets)))}
    assert marks[at["aten::empty.memory_format"]][1]  # the empty's output
    assert [bool(u) for t, u, _ in marks if t == "aten::slice.Tensor"] == [True, True]  # views of it
    assert marks[at["aten::mul.Tensor"]][1]  # computed from it
    sums = [u for t, u, _ in marks if t == "aten::sum.default"]
    assert [bool(u) for u in sums] == [True, False, True]  # half written; all written; a fresh empty
    add = marks[at["aten::add.Tensor"]]
    assert not add[1] and len(add[2]) == 1  # read after the outside write: defined, produced outside the trace
    assert marks[-1][0] == "aten::_local_scalar_dense.default" and marks[-1][1] == ["output 0"]
    recorded = trace.tensor(add[2][0])
    assert torch.equal(recorded, torch.full((2,), 7.0))


def test_replay_and_diff_compare_no_undefined_value_and_take_outside_writes_from_the_trace() -> None:
    a, b = _script(), _script()
    for mode in ("isolated", "chained"):
        report = opwire.replay(a, mode=mode, progress=False)  # type: ignore[arg-type]
        assert report.ok, (mode, str(report))
    # B's undefined values made different from A's: nothing to report
    for rec in b.records:
        for name in metadata_names(rec.metadata, UNDEFINED, rec.target):
            if not name.startswith("output"):
                b.set_tensor(name, b.tensor(name).fill_(-123.0))  # in place: the layout kept
    assert opwire.diff_traces(a, b).ok, str(opwire.diff_traces(a, b))
    # a defined value changed is still a difference (at the sum that read every written byte)
    whole = [r for r in b.records if r.target == "aten::sum.default"][1]
    name = whole.outputs[0].value.name
    b.set_tensor(name, b.tensor(name) + 1)
    d = opwire.diff_traces(a, b)
    assert d.first_divergence is not None and d.first_divergence.op == "aten::sum.default", str(d)


def test_one_rule_says_what_is_compared() -> None:
    assert not reproducible("aten::empty.memory_format") and not reproducible("aten::new_empty_strided.default")
    meta = {UNDEFINED: '["t3","output 0"]'}
    assert not reproducible("aten::mul.Tensor", meta, "t3") and not reproducible("aten::mul.Tensor", meta, "output 0")
    assert reproducible("aten::mul.Tensor", meta, "t4") and reproducible("aten::mul.Tensor", meta)
    with pytest.raises(DecodeError, match="metadata 'undefined' should be a JSON list of tensor names"):
        reproducible("aten::mul.Tensor", {UNDEFINED: "{"}, "t3")


def test_shadow_copies_stay_within_their_budget() -> None:
    defs = Definedness(max_shadow_bytes=64)
    old, new = torch.empty(12), torch.empty(12)  # 48 bytes each: the second pushes the first's shadow out
    defs.fresh(old, True)
    defs.fresh(new, True)
    _poke(old, 3.0)
    _poke(new, 4.0)
    assert not defs.outside_write(old) and not defs.defined(old)  # no longer watched, still undefined
    assert defs.outside_write(new) and defs.defined(new)
    defs.written(old, True)  # a recorded call wrote all of it
    assert defs.defined(old)
