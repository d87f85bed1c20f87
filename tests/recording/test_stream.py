"""The streamed trace format: written as calls happen, payloads stored once, cuts detected, every layout kept."""

from __future__ import annotations

import struct
import warnings
import zlib
from pathlib import Path

import pytest
import torch

import opwire
from opwire.errors import DecodeError, OpwireWarning
from opwire.recording.stream_reader import TraceReader
from opwire.schema import models as m

_LAYOUTS = {
    "contiguous": lambda: torch.arange(12.0).reshape(3, 4),
    "transposed": lambda: torch.arange(12.0).reshape(3, 4).t(),
    "offset": lambda: torch.arange(20.0)[5:11],
    "strided": lambda: torch.arange(20.0)[::3],
    "zero_stride": lambda: torch.arange(3.0).reshape(3, 1).expand(3, 4),
    "one_element_stride_6": lambda: torch.arange(6).reshape(1, 6)[:, 0],
    "one_element_offset": lambda: torch.arange(6.0).reshape(2, 3)[1:, 2:],
    "empty": lambda: torch.empty(0, 3),
    "empty_strided": lambda: torch.arange(12.0).reshape(3, 4)[:, 4:],
    "scalar": lambda: torch.tensor(2.5),
    "conj": lambda: torch.tensor([1 + 2j, 3 - 1j]).conj(),
}
_DTYPES = [
    torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8, torch.int16,
    torch.int32, torch.int64, torch.bool, torch.complex64, torch.complex128, torch.uint16, torch.uint32,
    torch.uint64, torch.float8_e4m3fn, torch.float8_e5m2,
]  # fmt: skip


def _mlp_trace(path: Path | None) -> opwire.Trace:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    x = torch.randn(4, 6)
    with opwire.record(path=path) as trace:
        model(x).sum().backward()
    return trace


def _same_layout(a: torch.Tensor, b: torch.Tensor) -> None:
    assert (a.dtype, a.shape, a.stride(), a.storage_offset()) == (b.dtype, b.shape, b.stride(), b.storage_offset())
    assert torch.equal(a.resolve_conj(), b.resolve_conj())


@pytest.mark.parametrize("layout", sorted(_LAYOUTS))
@pytest.mark.parametrize("form", ["memory", "stream"])
def test_every_layout_round_trips(layout: str, form: str, tmp_path: Path) -> None:
    value = _LAYOUTS[layout]()
    with opwire.record(path=tmp_path / "t.trace" if form == "stream" else None) as trace:
        out = value.clone() if layout != "conj" else value + 0
        torch.ops.aten.alias.default(value)
    assert not any("skipped" in r.metadata for r in trace.records)
    alias = next(r for r in trace.records if r.target == "aten::alias.default")
    name = alias.inputs[0].arg.value.name
    back = opwire.load_trace(tmp_path / "t.trace").tensor(name) if form == "stream" else trace.tensor(name)
    if layout == "conj":
        assert torch.equal(back, value.resolve_conj())
    else:
        _same_layout(back, value)
    assert out is not None


@pytest.mark.parametrize("dtype", _DTYPES, ids=str)
def test_every_dtype_round_trips_streamed(dtype: torch.dtype, tmp_path: Path) -> None:
    value = torch.arange(10).reshape(2, 5).t().to(dtype)
    with opwire.record(path=tmp_path / "t.trace") as trace:
        torch.ops.aten.alias.default(value)
    back = trace.tensor(trace.records[0].inputs[0].arg.value.name)
    assert back.dtype == dtype and back.stride() == value.stride()
    assert torch.equal(back.contiguous().view(torch.uint8), value.contiguous().view(torch.uint8))


def test_one_element_tensor_with_stride_records_and_replays(tmp_path: Path) -> None:
    """The Whisper case: `arange(6).reshape(1, 6)[:, 0]` used to fail when the record block ended."""
    for path in (None, tmp_path / "w.trace"):
        with opwire.record(path=path) as trace:
            y = torch.arange(6).reshape(1, 6)[:, 0] + 1
        assert y.tolist() == [1]
        assert not any("skipped" in r.metadata for r in trace.records)
        assert opwire.replay(trace, progress=False).ok
        opwire.Trace.loads(trace.dumps("compact"))


@pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor")
def test_a_value_that_cannot_be_serialized_loses_only_its_call(tmp_path: Path) -> None:
    q = torch.quantize_per_tensor(torch.ones(3), 0.1, 0, torch.quint8)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with opwire.record(path=tmp_path / "q.trace") as trace:
            a = torch.ones(3) * 2
            q.dequantize()
            b = a + 1
    assert b.tolist() == [3.0] * 3
    assert any(issubclass(w.category, OpwireWarning) for w in caught)
    targets = [r.target for r in trace.records]
    assert "aten::mul.Tensor" in targets and "aten::add.Tensor" in targets
    assert any("skipped" in r.metadata for r in trace.records)
    assert opwire.replay(trace, progress=False).ok


def test_weight_and_its_transpose_share_one_payload(tmp_path: Path) -> None:
    trace = _mlp_trace(tmp_path / "mlp.trace")
    reader = TraceReader(tmp_path / "mlp.trace")
    payloads = reader._index.payloads
    tensors = reader._index.tensors
    weight = next(r for r in trace.records if r.target == "aten::t.default")
    w_in, w_t = weight.inputs[0].arg.value.name, weight.outputs[0].value.name
    assert tensors[w_in].payload == tensors[w_t].payload
    assert len(payloads) < len([t for t in tensors.values() if t.payload is not None])
    reader.close()


def test_stream_and_memory_traces_hold_the_same_records_and_values(tmp_path: Path) -> None:
    mem, streamed = _mlp_trace(None), _mlp_trace(tmp_path / "mlp.trace")
    assert [r.target for r in mem.records] == [r.target for r in streamed.records]
    assert sorted(mem.names()) == sorted(streamed.names())
    for name in mem.names():
        _same_layout(mem.tensor(name), streamed.tensor(name))
    assert streamed.model.header.op_schemas == mem.header.op_schemas
    streamed.save(tmp_path / "converted.compact")
    mem.save(tmp_path / "converted.trace", format="stream")
    again = opwire.load_trace(tmp_path / "converted.trace")
    assert [r.target for r in again.records] == [r.target for r in mem.records]


def test_records_carry_source_location_and_module(tmp_path: Path) -> None:
    trace = _mlp_trace(tmp_path / "mlp.trace")
    tanh = next(r for r in trace.records if r.target == "aten::tanh.default")
    assert tanh.metadata["module"] == "Sequential.1"
    assert (
        tanh.metadata["source"].startswith("tests/recording/test_stream.py:")
        or "test_stream.py:" in (tanh.metadata["source"])
    )


def test_a_cut_trace_replays_up_to_the_cut_and_says_where(tmp_path: Path) -> None:
    path = tmp_path / "mlp.trace"
    full = _mlp_trace(path)
    data = path.read_bytes()
    for keep in (len(data) - 3, len(data) * 2 // 3, len(data) // 3):
        cut = tmp_path / f"cut{keep}.trace"
        cut.write_bytes(data[:keep])
        trace = opwire.load_trace(cut)
        assert trace.cut is not None and "cut at byte" in trace.cut
        assert len(trace) <= len(full)
        report = opwire.replay(trace, progress=False)
        assert report.ok, str(report)
        assert report.cut == trace.cut
        assert "cut at byte" in str(report)


def test_corrupt_frames_are_decode_errors(tmp_path: Path) -> None:
    path = tmp_path / "mlp.trace"
    _mlp_trace(path)
    data = bytearray(path.read_bytes())
    header_len = 19 + len("TraceFrame")
    kind, size, check = struct.unpack(">cQI", data[header_len : header_len + 13])
    assert kind == b"H"
    flipped = bytearray(data)
    flipped[header_len + 13] ^= 0xFF
    (tmp_path / "flip.trace").write_bytes(flipped)
    with pytest.raises(DecodeError, match="CRC-32 check failed"):
        opwire.load_trace(tmp_path / "flip.trace")
    odd = bytearray(data)
    odd[header_len : header_len + 1] = b"Z"
    (tmp_path / "kind.trace").write_bytes(odd)
    with pytest.raises(DecodeError, match="frame kind b'Z'"):
        opwire.load_trace(tmp_path / "kind.trace")
    assert zlib.crc32(bytes(data[header_len + 13 : header_len + 13 + size])) == check


def test_a_corrupt_payload_is_reported_when_read(tmp_path: Path) -> None:
    path = tmp_path / "mlp.trace"
    _mlp_trace(path)
    reader = TraceReader(path)
    name, entry = next((n, e) for n, e in reader._index.tensors.items() if e.payload is not None)
    offset, _ = reader._index.payloads[entry.payload]
    reader.close()
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(data)
    with pytest.raises(DecodeError, match="do not match its SHA-256"):
        opwire.load_trace(path).tensor(name)


def test_trace_tensors_read_and_replace(tmp_path: Path) -> None:
    for path in (None, tmp_path / "mlp.trace"):
        trace = _mlp_trace(path)
        i, rec = next((i, r) for i, r in enumerate(trace.records) if r.target == "aten::tanh.default")
        name = rec.outputs[0].value.name
        bad = trace.tensor(name).clone()
        bad[2, 5] += 0.5
        trace.set_tensor(name, bad)
        assert torch.equal(trace.tensor(name), bad)
        report = opwire.replay(trace, progress=False)
        assert [x.index for x in report.mismatches][:1] == [i]
        with pytest.raises(KeyError):
            trace.set_tensor("t999999", bad)


def test_streamed_header_is_opwires(tmp_path: Path) -> None:
    path = tmp_path / "mlp.trace"
    _mlp_trace(path)
    from opwire.serde import framing

    assert framing.sniff(path.read_bytes()[:64]) == ("compact", "TraceFrame", m.RECORDS_VERSION)


def test_the_frames_of_a_stream_share_one_budget_and_load_trace_passes_it_on(tmp_path: Path) -> None:
    """Issue 16: every frame had a fresh budget and load_trace passed none, so 300k small tensor frames
    (14 MB) cost +1 GB at open. Now what opening keeps is charged to one max_elements / max_bytes budget."""
    from support.hostile import Work, tensor_frames_trace

    path = tensor_frames_trace(Work(tmp_path), 200)  # 14 values a frame, plus the header's
    with TraceReader(path) as reader:
        assert len(reader.names()) == 200
    with pytest.raises(DecodeError, match=r"frames\.trace@\d+: values decoded so far: more than 1000 exceeds"):
        TraceReader(path, max_elements=1000)
    with pytest.raises(DecodeError, match=r"more than 1000 exceeds the budget max_elements=1000.*--max-elements"):
        opwire.load_trace(path, max_elements=1000)
    assert len(opwire.load_trace(path, max_elements=5000).names()) == 200
    with pytest.raises(
        DecodeError, match=r"bytes of the frames decoded on open: \d+ exceeds the budget max_bytes=2000"
    ):
        opwire.load_trace(path, max_bytes=2000)
