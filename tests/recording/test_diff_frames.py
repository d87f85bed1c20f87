"""`diff_traces` over two streamed traces' frames (`FrameCalls`) gives the report the records' comparison gives."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import opwire
from opwire.recording.diff_frames import FrameCalls
from opwire.recording.frames import ScanSource
from opwire.recording.source import StreamSource
from opwire.recording.stream_reader import TraceReader
from opwire.recording.trace_diff import TraceDiff, diff_traces


def _loop(path: Path, *, perturb: int | None = None, insert: int | None = None) -> Path:
    """A recorded training loop (3 steps): `perturb` changes step k's input a little, `insert` adds a call to it."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    torch.manual_seed(1)
    data = [torch.randn(4, 6) for _ in range(3)]
    with opwire.record(path=path):
        for step, x in enumerate(data):
            if step == perturb:
                x = x + 1e-3
            if step == insert:
                x = x * 1
            loss = model(x).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            loss.item()  # a scalar output
            torch.full((2,), float("nan"))  # a NaN argument: the same argument in both runs
            torch.randn(3)  # values no run reproduces
            torch.empty(2).zero_()  # undefined memory, then defined
    return path


@pytest.fixture(scope="module")
def loops(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("loops")
    found = {
        "base": _loop(d / "base.trace"),
        "again": _loop(d / "again.trace"),  # recorded again: the same frames
        "perturbed": _loop(d / "perturbed.trace", perturb=2),
        "inserted": _loop(d / "inserted.trace", insert=2),
    }
    corrupt = d / "corrupt.trace"  # one payload byte flipped: the comparison says the payload is unreadable
    with TraceReader(found["base"]) as reader:
        name = next(r.outputs[0].value.name for r in reader.records() if r.target == "aten::tanh.default")
        entry = reader._index.tensors[name]
        assert entry.payload is not None
        offset = reader._index.payloads[entry.payload][0]
    data = bytearray(found["base"].read_bytes())
    data[offset] ^= 0x40
    corrupt.write_bytes(data)
    found["corrupt"] = corrupt
    return found


def _diffs(a: Path, b: Path) -> tuple[TraceDiff, TraceDiff, int]:
    """(the fast path's report, the records' comparison's, the aligned pairs the frames proved alike)."""
    opened = [ScanSource(a), ScanSource(b), StreamSource(a), StreamSource(b), ScanSource(a), ScanSource(b)]
    try:
        fast = diff_traces(opwire.Trace(source=opened[0]), opwire.Trace(source=opened[1]), origins=False)
        full = diff_traces(opwire.Trace(source=opened[2]), opwire.Trace(source=opened[3]), origins=False)
        calls = FrameCalls.of(opened[4], opened[5])
        assert calls is not None
        return fast, full, sum(calls.agree(i, j) for i, j in calls.pairs())
    finally:
        for src in opened:
            src.close()


@pytest.mark.parametrize(
    ("a", "b"),
    [("base", "again"), ("base", "perturbed"), ("base", "inserted"), ("inserted", "base"), ("base", "corrupt")],
)
def test_the_frames_give_the_records_report(loops: dict[str, Path], a: str, b: str) -> None:
    fast, full, proven = _diffs(loops[a], loops[b])
    assert fast.to_dict() == full.to_dict() and str(fast) == str(full)
    assert proven > fast.matched // 3
    assert bool(full.differences or full.only_a or full.only_b) == (b != "again")


def test_only_equal_frames_are_proven_alike(loops: dict[str, Path]) -> None:
    _, full, proven = _diffs(loops["base"], loops["again"])
    assert full.matched == full.a_calls and not full.differences  # a NaN argument passed in both runs is no difference
    scalars = sum(1 for r in opwire.load_trace(loops["base"]).records if r.target.startswith("aten::_local_scalar"))
    assert proven == full.matched and scalars == 3  # a float output, a NaN argument: equal frames are proven alike
    _, perturbed, proven = _diffs(loops["base"], loops["perturbed"])
    assert perturbed.first_divergence is not None and proven < full.matched


def test_a_tensor_frame_read_for_both_traces_is_charged_once(tmp_path: Path) -> None:
    from support.hostile import Work, tensor_frames_trace

    from opwire.errors import DecodeError
    from opwire.recording.frames import FrameReader

    path = tensor_frames_trace(Work(tmp_path), 200)  # 14 values a frame, one charged for indexing each
    with FrameReader(path, max_elements=3100) as a, FrameReader(path, max_elements=3100) as b:
        for name in a.names():
            entry = a.twin_entry(name, b)
            meta = a.meta(name)  # decoded again, not charged again
            assert entry is not None and meta is not None and entry.value.sizes == meta.sizes == [0]
    for mine, theirs in ((2500, None), (None, 2500)):  # each reader's budget is charged, as reading both would
        with FrameReader(path, max_elements=mine) as a, FrameReader(path, max_elements=theirs) as b:
            where = (a if mine else b).source
            with pytest.raises(DecodeError, match=rf"^{where}@\d+: values decoded so far: .* max_elements=2500"):
                for name in a.names():
                    a.twin_entry(name, b)


def test_recorded_values_compare_nan_alike_and_types_exactly() -> None:
    from opwire.recording.pair_compare import same_value

    nan = float("nan")
    assert same_value({"as_float": nan}, {"as_float": float("nan")})
    assert same_value({"as_floats": [1.0, nan]}, {"as_floats": [1.0, nan]})
    assert not same_value({"as_float": nan}, {"as_float": 0.0})
    assert not same_value({"as_float": 0.0}, {"as_float": nan})
    assert not same_value({"as_int": 1}, {"as_int": True})  # bools are no ints
    assert not same_value({"as_ints": [1, 2]}, {"as_ints": [1]})
    assert not same_value({"a": 1}, {"b": 1})
