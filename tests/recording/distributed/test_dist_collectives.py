"""The collectives table against the c10d schemas the installed torch registers; launch environment handling."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.distributed

import opwire
from opwire.recording.collectives import COLLECTIVES, NOT_CHECKED, collective_of
from opwire.recording.launch import launch_info, rank_path


def _schemas() -> dict[str, torch._C.FunctionSchema]:
    return {s.name: s for s in torch._C._jit_get_all_schemas() if s.name.startswith(("c10d::", "_c10d_functional::"))}


def test_every_row_names_arguments_its_op_has() -> None:
    schemas = _schemas()
    for op, spec in COLLECTIVES.items():
        assert op in schemas, f"{op} is not a c10d op of this torch"
        names = {a.name for a in schemas[op].arguments}
        for field in (spec.inputs, spec.reduce, spec.root, spec.group, *spec.writes):
            assert not field or field in names, f"{op} has no argument {field!r}: {schemas[op]}"
        if spec.outputs == "return":
            assert schemas[op].returns, op
        elif spec.outputs:
            assert spec.outputs in names, op


def test_every_c10d_op_is_a_row_or_named_as_not_checked() -> None:
    unknown = sorted(set(_schemas()) - set(COLLECTIVES) - set(NOT_CHECKED))
    assert not unknown, f"c10d ops opwire neither checks nor lists in NOT_CHECKED: {unknown}"


def test_overloads_resolve_to_their_row() -> None:
    assert collective_of("c10d::allreduce_.default") is COLLECTIVES["c10d::allreduce_"]
    assert collective_of("aten::add.Tensor") is None


def test_launch_info_comes_from_the_launcher_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert launch_info() is None
    with pytest.raises(ValueError, match=r"names \{rank\} but RANK/WORLD_SIZE are not set"):
        rank_path("run/rank{rank}.trace")
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "job-7")
    info = launch_info()
    assert info is not None and (info.rank, info.world_size, info.run_id) == (1, 2, "job-7")
    monkeypatch.setenv("RANK", "2")
    with pytest.raises(ValueError, match="outside WORLD_SIZE=2"):
        launch_info()


def test_record_path_takes_the_rank(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "job-7")
    with opwire.record(path=tmp_path / "rank{rank}.trace", progress=False):
        torch.ones(2).add(1)
    trace = opwire.load_trace(tmp_path / "rank1.trace")
    d = trace.header.distributed
    assert d is not None and (d.rank, d.world_size, d.run_id, d.groups) == (1, 2, "job-7", [])


def test_a_reduction_check_reads_its_tensors_without_writing_them() -> None:
    from opwire.recording.distributed.collective_rules import reduce
    from opwire.recording.distributed.numerics import _differs

    xs = [
        torch.tensor([1.0, 2.0, float("nan")], dtype=torch.float64),
        torch.tensor([3.0, -1.0, 0.0], dtype=torch.float64),
    ]
    want, scale = reduce("SUM", xs)
    assert scale is not None
    got = want.clone()
    assert _differs(got, want, scale) is None and torch.equal(got.nan_to_num(), want.nan_to_num())
    got[1] += 1e-3
    before = got.clone()
    assert _differs(got, want, scale) == "element 1 is 1.001, expected 1 (max abs diff inf, rtol=1e-07, atol=1e-07)"
    assert torch.equal(got.nan_to_num(), before.nan_to_num())  # the recorded value is left as it was
    got[2] = 0.0
    assert _differs(got, want, scale).startswith("element 1 is 1.001")  # type: ignore[union-attr]
    assert (
        _differs(torch.tensor([4.0, 1.0, 5.0]), want, scale)
        == "element 2 is 5, expected nan (max abs diff inf, rtol=1e-05, atol=1e-06)"
    )
