"""The light reader of streamed traces (`FrameReader`): what `TraceReader` reads, without a model per frame."""

from __future__ import annotations

import hashlib
import re
import struct
from pathlib import Path

import pytest
import torch

import opwire
from opwire.errors import DecodeError
from opwire.recording.frame_index import IndexedReader
from opwire.recording.frames import FrameReader, ScanSource, first_string, open_source
from opwire.recording.source import StreamSource
from opwire.recording.stream_frames import read_stream_header
from opwire.recording.stream_reader import TraceReader
from opwire.recording.trace_diff import diff_traces

_FRAME = struct.Struct(">cQI")


@pytest.fixture(scope="module")
def mlp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("frames") / "mlp.trace"
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    with opwire.record(path=path):
        model(torch.randn(4, 6)).sum().backward()
    return path


def _frames(path: Path) -> list[tuple[bytes, int, int]]:
    """(kind, body offset, body size) of every frame."""
    data = path.read_bytes()
    pos, out = 19 + len("TraceFrame"), []
    while pos < len(data):
        kind, size, _ = _FRAME.unpack(data[pos : pos + _FRAME.size])
        out.append((kind, pos + _FRAME.size, size))
        pos += _FRAME.size + size
    return out


def test_it_reads_what_the_trace_reader_reads(mlp: Path) -> None:
    with TraceReader(mlp) as full, FrameReader(mlp) as light:
        assert light.names() == full.names() and len(light) == len(full)
        assert [light.target(i) for i in range(len(light))] == [r.target for r in full.records()]
        assert light.header == full.header
        for i in range(-1, len(full)):
            assert light.freed_after(i) == full.freed_after(i)
        for name in full.names():
            assert light.meta(name) == full.meta(name) and light.nbytes(name) == full.nbytes(name)
            a, b = light.load(name), full.load(name)
            assert (a.dtype, a.shape, a.stride()) == (b.dtype, b.shape, b.stride()) and torch.equal(a, b)
        assert light.verify() == full.verify()


def test_payloads_are_hashed_in_place_and_checked(mlp: Path, tmp_path: Path) -> None:
    with TraceReader(mlp) as full:
        name, entry = next((n, e) for n, e in full._index.tensors.items() if e.payload is not None)
        offset, _ = full._index.payloads[entry.payload]
    with FrameReader(mlp) as light:
        assert light.payload_digest(name) == entry.payload
    bad = tmp_path / "bad.trace"
    data = bytearray(mlp.read_bytes())
    data[offset] ^= 0xFF
    bad.write_bytes(data)
    with FrameReader(bad) as light, pytest.raises(DecodeError, match=r"tensors\['t\d+'\]: the payload's bytes do not"):
        light.payload_digest(name)


def test_bytes_equal_to_a_checked_payload_are_compared_not_hashed_and_refused_as_before_where_they_differ(
    mlp: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with TraceReader(mlp) as full:
        name, entry = next((n, e) for n, e in full._index.tensors.items() if e.payload is not None)
        offset, _ = full._index.payloads[entry.payload]
    bad = tmp_path / "bad.trace"
    data = bytearray(mlp.read_bytes())
    data[offset] ^= 0xFF
    bad.write_bytes(data)
    checked, same, corrupt = ScanSource(mlp), ScanSource(mlp), ScanSource(bad)
    try:
        assert same.payload_digest(name, like=checked) == entry.payload  # `checked` never hashed it: hashed here
        hashed: list[int] = []
        sha256 = hashlib.sha256
        monkeypatch.setattr(hashlib, "sha256", lambda *a: hashed.append(1) or sha256(*a))
        assert checked.payload_digest(name, like=same) == entry.payload and hashed == []
        with pytest.raises(DecodeError, match=r"tensors\['t\d+'\]: the payload's bytes do not match its SHA-256"):
            corrupt.payload_digest(name, like=same)
        assert hashed == [1]  # the bytes differ: hashed, and refused in `payload_digest`'s words
    finally:
        for src in (checked, same, corrupt):
            src.close()


@pytest.mark.parametrize("kind", [b"T", b"R", b"F"])
def test_a_corrupt_frame_is_refused_on_open_as_before(mlp: Path, tmp_path: Path, kind: bytes) -> None:
    _, body, _ = next(f for f in _frames(mlp) if f[0] == kind)
    data = bytearray(mlp.read_bytes())
    data[body + 4] ^= 0xFF
    bad = tmp_path / "bad.trace"
    bad.write_bytes(data)
    with pytest.raises(DecodeError, match=r"corrupt \w+ frame at byte \d+ \(CRC-32 check failed\)"):
        FrameReader(bad).close()


def test_the_first_field_is_read_only_where_the_writer_puts_it() -> None:
    head = b"\x0c<\xa8"
    assert first_string(head + b"\x02t1rest", head) == "t1"
    assert first_string(head + b"\x80\x01" + b"x" * 128, head) == "x" * 128
    for body in (
        b"\x0cP\xa8\x02t1",
        head + b"\x05t1",
        head + b"\x80",
        head + b"\x80" * 6 + b"\x01",
        head + b"\x01\xff",
    ):
        assert first_string(body, head) is None  # another field, cut, an endless length, not UTF-8


def test_frames_decoded_on_use_share_the_open_budget(tmp_path: Path) -> None:
    from support.hostile import Work, tensor_frames_trace

    path = tensor_frames_trace(Work(tmp_path), 200)  # 14 values a frame
    with FrameReader(path, max_elements=1000) as light:  # indexing charges one value a frame
        with pytest.raises(DecodeError, match="exceeds the budget max_elements=1000"):
            for name in light.names():
                light.meta(name)


def test_diff_through_the_light_source_agrees_with_the_full_one(mlp: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.trace"
    trace = opwire.load_trace(mlp)
    name = next(n for r in trace.records if r.target == "aten::tanh.default" for n in [r.outputs[0].value.name])
    changed = trace.tensor(name) + 0.25
    trace.set_tensor(name, changed)
    trace.save(other, format="stream")
    for a, b in ((mlp, mlp), (mlp, other)):
        light = diff_traces(opwire.Trace(source=ScanSource(a)), opwire.Trace(source=ScanSource(b)), origins=False)
        full = diff_traces(opwire.Trace(source=StreamSource(a)), opwire.Trace(source=StreamSource(b)), origins=False)
        assert str(light) == str(full) and light.ok == (a == b)
    src = open_source(mlp)
    assert isinstance(src, ScanSource)
    src.close()


def test_two_readers_with_one_memo_decode_a_shared_frame_once(mlp: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy.trace"
    copy.write_bytes(mlp.read_bytes())
    memo: dict[bytes, object] = {}
    with FrameReader(mlp, memo=memo) as a, FrameReader(copy, memo=memo) as b, TraceReader(mlp) as full:  # type: ignore[arg-type]
        for i in range(len(full)):
            ra = a.record(i)
            assert memo and b.record(i) is ra and ra == full.record(i)
        assert not memo  # each entry handed over once
        name = full.names()[0]
        assert a.meta(name) == full.meta(name) and b.meta(name) == full.meta(name) and not memo


def test_an_index_handed_over_reads_what_the_scan_reads(mlp: Path, tmp_path: Path) -> None:
    with FrameReader(mlp) as full:
        names = full.names()
        index = IndexedReader.index_of(full, [*names, "no-such-tensor"])
        assert index is not None and index["tensors"]["no-such-tensor"] is None
        with IndexedReader(mlp, index) as given:
            assert len(given) == 0 and given.header == read_stream_header(mlp)  # the header frame alone
            for name in names:
                assert given.meta(name) == full.meta(name) and given.undefined(name) == full.undefined(name)
                assert given.payload_digest(name) == full.payload_digest(name)
                a, b = given.load(name), full.load(name)
                assert (a.dtype, a.shape, a.stride()) == (b.dtype, b.shape, b.stride()) and torch.equal(a, b)
            assert given.meta("no-such-tensor") is None
        with (
            IndexedReader(mlp, IndexedReader.index_of(full, names[:1]) or {}) as given,
            pytest.raises(KeyError, match=re.escape(repr(names[1]))),
        ):
            given.meta(names[1])  # only what the index lists: nothing is taken for absent
    grown = tmp_path / "grown.trace"
    grown.write_bytes(mlp.read_bytes() + b"\0")
    with pytest.raises(DecodeError, match="the file changed while the run was checked"):
        IndexedReader(grown, index)


def test_an_index_handed_over_still_checks_frames_and_payloads(mlp: Path, tmp_path: Path) -> None:
    with FrameReader(mlp) as full:
        name = next(n for n in full.names() if full.nbytes(n) > 0)
        index = IndexedReader.index_of(full, [name])
        assert index is not None
    bad = tmp_path / "bad.trace"
    data = bytearray(mlp.read_bytes())
    ((offset, _),) = index["payloads"].values()
    data[offset] ^= 0xFF  # a payload byte: its SHA-256 no longer matches
    body, size, _, _ = index["tensors"][name]
    bad.write_bytes(bytes(data))
    with IndexedReader(bad, index) as given, pytest.raises(DecodeError, match="do not match its SHA-256"):
        given.load(name)
    data[offset] ^= 0xFF
    data[body + size - 1] ^= 0xFF  # the tensor frame's last byte: its CRC-32 fails
    bad.write_bytes(bytes(data))
    with IndexedReader(bad, index) as given, pytest.raises(DecodeError, match="CRC-32 check failed"):
        given.meta(name)
