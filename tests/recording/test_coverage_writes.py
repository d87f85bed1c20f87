"""Memory from `empty` becomes defined when recorded writes have covered all of it, piece by piece: through
slices and strided views, and through index tensors (transformers' MoE routing fills `empty_like(perm)` with
`inv[perm] = arange(n)`). Until then its values are not compared; after, they are.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

import opwire
from opwire.recording import coverage_writes
from opwire.recording.coverage_writes import covered, indexed_spans, indexed_write, union, view_spans
from opwire.recording.definedness import UNDEFINED


def _undefined(work: Callable[[], object]) -> list[tuple[str, list[str]]]:
    """(target, undefined names) of each recorded call of `work`."""
    with opwire.record() as trace:
        work()
    return [(r.target, json.loads(r.metadata.get(UNDEFINED, "[]"))) for r in trace.records]


def _last_defined(work: Callable[[], object]) -> bool:
    """Whether the last recorded call of `work` (a read of the filled memory) has no undefined value."""
    return _undefined(work)[-1][1] == []


def _slices() -> object:
    x = torch.empty(6)
    x[:2] = torch.ones(2)
    x[2:] = torch.zeros(4)
    return x * 2


def _half_slices() -> object:
    x = torch.empty(6)
    x[:2] = torch.ones(2)
    x[3:] = torch.zeros(3)  # element 2 never written
    return x * 2


def _permutation() -> object:
    perm = torch.randperm(8)
    inv = torch.empty_like(perm)
    inv[perm] = torch.arange(8)
    return inv + 1


def _missing_one() -> object:
    x = torch.empty(5)
    x[torch.tensor([0, 1, 2, 4])] = torch.ones(4)
    return x + 1


def _scatter() -> object:
    x = torch.empty(3, 4)
    index = torch.tensor([[0, 1, 2, 0], [1, 2, 0, 1], [2, 0, 1, 2]])  # every row once in each column
    x.scatter_(0, index, torch.ones(3, 4))
    return x + 1


def _scatter_reduce() -> object:
    x = torch.empty(3, 4)
    index = torch.tensor([[0, 1, 2, 0], [1, 2, 0, 1], [2, 0, 1, 2]])
    with warnings.catch_warnings():  # torch: the reduce argument is deprecated
        warnings.simplefilter("ignore", UserWarning)
        x.scatter_(0, index, torch.ones(3, 4), reduce="add")  # reads what was there
    return x + 1


def _accumulate() -> object:
    x = torch.empty(4)
    x.index_put_((torch.arange(4),), torch.ones(4), accumulate=True)  # reads what was there
    return x + 1


def _columns() -> object:
    x = torch.empty(3, 2)
    x[:, 0] = 1.0
    x[:, 1] = torch.ones(3)
    return x + 1


def _masked_and_index_copy() -> object:
    x = torch.empty(2, 3)
    x.masked_fill_(torch.tensor([True, False, True]), 0.0)  # columns 0 and 2, broadcast over rows
    x.index_copy_(1, torch.tensor([1]), torch.ones(2, 1))
    return x + 1


def _bool_mask_and_scatter_value() -> object:
    x = torch.empty(2, 3)
    x[torch.tensor([True, False])] = 1.0  # row 0 through a boolean index
    x.masked_scatter_(torch.tensor([[False, False, False], [True, True, False]]), torch.ones(2))
    x.index_fill_(1, torch.tensor([2]), 0.0)
    return x + 1


def _put() -> object:
    x = torch.empty(2, 2)
    x.put_(torch.tensor([3, 0, -2, 1]), torch.ones(4))  # flat positions, one from the end
    return x + 1


def _put_accumulate() -> object:
    x = torch.empty(2, 2)
    x.put_(torch.tensor([3, 0, 2, 1]), torch.ones(4), accumulate=True)
    return x + 1


def _out_into_a_column() -> object:
    x = torch.empty(3, 2)
    torch.add(torch.ones(3), 1, out=x[:, 0])
    torch.mul(torch.ones(3), 2, out=x[:, 1])
    return x + 1


def _from_undefined_values() -> object:
    x = torch.empty(4)
    x[torch.arange(4)] = torch.empty(4)  # every position written, with undefined values
    return x + 1


@pytest.mark.parametrize(
    ("work", "defined"),
    [
        (_slices, True),
        (_half_slices, False),
        (_permutation, True),
        (_missing_one, False),
        (_scatter, True),
        (_scatter_reduce, False),
        (_accumulate, False),
        (_columns, True),
        (_masked_and_index_copy, True),
        (_bool_mask_and_scatter_value, True),
        (_out_into_a_column, True),
        (_put, True),
        (_put_accumulate, False),
        (_from_undefined_values, False),
    ],
)
def test_memory_is_defined_once_recorded_writes_cover_all_of_it(work: Callable[[], object], defined: bool) -> None:
    assert _last_defined(work) is defined


def test_a_column_written_is_defined_while_the_other_is_not() -> None:
    def work() -> None:
        x = torch.empty(3, 2)
        x[:, 0] = 1.0
        x[:, 0] + 1  # the written column
        x[:, 1] + 1  # the other one

    marks = _undefined(work)
    assert [bool(u) for t, u in marks if t == "aten::add.Tensor"] == [False, True]


def test_an_indexed_write_into_defined_memory_with_undefined_values_undefines_only_its_positions() -> None:
    def work() -> None:
        x = torch.zeros(4)
        x[torch.tensor([1])] = torch.empty(1)
        x[:1] + 1
        x[1:2] + 1

    marks = _undefined(work)
    assert [bool(u) for t, u in marks if t == "aten::add.Tensor"] == [False, True]


def test_replay_compares_the_filled_memory_and_finds_a_changed_value() -> None:
    with opwire.record() as trace:
        _permutation()
    assert opwire.replay(trace).mismatches == []
    last = trace.records[-1]
    assert last.target == "aten::add.Tensor" and UNDEFINED not in last.metadata  # so replay compares it


def test_view_spans_merge_a_strided_view_into_its_runs_of_elements() -> None:
    x = torch.zeros(4, 3)
    assert view_spans(x) == [(0, 48)]
    assert view_spans(x[:, :2]) == [(0, 8), (12, 20), (24, 32), (36, 44)]
    assert view_spans(x.t()) == [(0, 48)]  # dense in another order
    assert view_spans(x[1:1]) == []
    assert view_spans(torch.zeros(2, 1).expand(2, 3)) == [(0, 8)]  # stride 0: each element once


def test_union_and_covered() -> None:
    assert union([(0, 4)], [(4, 8), (12, 16)]) == [(0, 8), (12, 16)]
    assert covered([(0, 8), (12, 16)], [(0, 4), (12, 16)])
    assert not covered([(0, 8), (12, 16)], [(6, 13)])
    assert covered([], [(3, 3)])


def test_past_the_limits_a_write_is_not_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(coverage_writes, "MAX_SPANS", 2)
    assert union([(0, 1)], [(2, 3), (4, 5)]) is None
    assert view_spans(torch.zeros(4, 3)[:, :2]) is None
    assert not _last_defined(_columns)  # each column is 3 spans: neither is kept, the memory stays undefined
    monkeypatch.setattr(coverage_writes, "MAX_ELEMENTS", 2)
    assert indexed_spans("aten::index_put_", {"self": torch.zeros(3), "indices": [torch.tensor([0])]}) is None


def test_indexed_spans_read_the_index_values() -> None:
    bound = {"self": torch.zeros(5), "indices": [torch.tensor([4, 0, 1])], "values": torch.ones(3)}
    assert indexed_write("aten::index_put_.default", bound) == "self"
    assert indexed_spans("aten::index_put_.default", bound) == [(0, 8), (16, 20)]
    assert indexed_write("aten::index_put_.default", {**bound, "accumulate": True}) is None
    assert indexed_write("aten::add_.Tensor", bound) is None
    assert indexed_write("mylib::index_put_", bound) is None  # not torch's op
    assert indexed_spans("aten::index_put_.default", {**bound, "indices": [torch.tensor([7])]}) is None  # bad index


def test_docs_state_the_limits_in_force() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "replay.md").read_text()
    text = " ".join(doc.split())
    assert f"at most {coverage_writes.MAX_ELEMENTS >> 20}M elements of a write" in text
    assert f"at most {coverage_writes.MAX_SPANS >> 10}k separate written spans per storage" in text


def test_indexed_spans_of_a_view_are_offsets_in_its_storage() -> None:
    tail = torch.zeros(10)[2:]  # contiguous, from element 2
    assert indexed_spans("aten::index_put_", {"self": tail, "indices": [torch.tensor([0, 1, 5])]}) == [
        (8, 16),
        (28, 32),
    ]
    columns = torch.zeros(4, 3).t()  # row 0 of the transpose: column 0 of the storage's rows
    spans = indexed_spans("aten::index_put_", {"self": columns, "indices": [torch.tensor([0])]})
    assert spans == [(0, 4), (12, 16), (24, 28), (36, 40)]
    rows = {"self": torch.zeros(2, 3), "dim": 0, "index": torch.tensor([1]), "source": torch.ones(1, 3)}
    assert indexed_spans("aten::index_copy_", rows) == [(12, 24)]
    mask = {"self": torch.zeros(2, 2), "mask": torch.tensor([[True, False], [False, True]]), "value": 1.0}
    assert indexed_spans("aten::masked_fill_.Scalar", mask) == [(0, 4), (12, 16)]


def test_indexed_spans_of_arguments_that_do_not_fit_are_unknown() -> None:
    assert indexed_spans("aten::index_copy_", {"self": torch.zeros(2)}) is None  # no dim, no index
    assert indexed_spans("aten::scatter_.src", {"self": torch.zeros(2), "dim": "x", "index": torch.zeros(1)}) is None
    assert indexed_spans("aten::masked_fill_.Scalar", {"self": torch.zeros(2), "mask": torch.ones(3).bool()}) is None
    assert indexed_spans("aten::add_.Tensor", {"self": torch.zeros(2)}) is None  # not an indexed write
