"""Records 1.7: opwire's Thrift writer pads each tensor of an OpwireArchive's tables so that its payload starts at
a multiple of 64 in the file, every contiguous tensor of a written archive is then viewed in place, files without
padding still load, and a hostile or misplaced padding is an opwire error."""

from __future__ import annotations

import ctypes
import struct
from pathlib import Path

import pytest
import torch
from torch import nn

import opwire
from opwire.errors import DecodeError, EncodeError
from opwire.schema import models as m
from opwire.serde import framing, thrift, thrift_archive, torch_bridge
from opwire.serde._padding import ALIGN
from opwire.serde._thrift import tables
from opwire.serde._thrift.encode import encode_payload
from opwire.serde.tensors import from_tensor, to_tensor

CODECS = ("binary", "compact")


class _Mixed(nn.Module):
    """float32, float16, int64 and bool tensors, with odd byte sizes between them (3, 5, 7 and 13 elements)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(7, 5)
        self.fp16 = nn.Parameter(torch.randn(13, dtype=torch.float16))
        self.odd = nn.Parameter(torch.randn(3))
        self.tw = nn.Parameter(torch.randn(5, 5).t())  # non-contiguous: copied whatever the padding
        self.register_buffer("mask", torch.tensor([True, False, True, True, False, True, False]))
        self.register_buffer("idx", torch.arange(5))
        self.register_buffer("flags", torch.tensor([1, 0, 1], dtype=torch.uint8))
        self.register_buffer("dbl", torch.randn(5, dtype=torch.float64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.lin(x) @ self.tw + self.idx + self.dbl.float()
        return y.sum(0) + self.fp16.float().sum() + self.odd.sum() + self.mask.sum() + self.flags.sum()


@pytest.fixture(scope="module")
def mixed() -> tuple[m.OpwireArchive, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    module, x = _Mixed(), torch.randn(3, 7)
    ep = torch.export.export(module, (x,))
    return torch_bridge.archive_from_exported_program(ep), x, module(x)


def _counts(path: Path) -> tuple[dict[str, list[str]], thrift_archive.ThriftArchive]:
    """Tensor names by how the mapped reader gave them: "mapped" (a view of the file) or "copied"."""
    lazy = thrift_archive.open(path)
    base = ctypes.addressof(ctypes.c_char.from_buffer(lazy._buffer()))
    size = path.stat().st_size
    out: dict[str, list[str]] = {"mapped": [], "copied": []}
    for table, tensors in zip(("weights", "constants"), lazy.tensors("cpu"), strict=True):
        for name, t in tensors.items():
            out["mapped" if base <= t.data_ptr() < base + size else "copied"].append(f"{table}.{name}")
    return out, lazy


@pytest.mark.parametrize("codec", CODECS)
def test_every_contiguous_tensor_of_a_written_archive_is_mapped(
    tmp_path: Path, codec: str, mixed: tuple[m.OpwireArchive, torch.Tensor, torch.Tensor]
) -> None:
    archive, x, expected = mixed
    dtypes = {tv.dtype for tv in archive.weights.values()}
    assert {m.ScalarType.FLOAT, m.ScalarType.HALF, m.ScalarType.LONG, m.ScalarType.BOOL} <= dtypes
    path = tmp_path / f"a.{codec}"
    path.write_bytes(opwire.dumps(archive, codec))  # type: ignore[arg-type]
    counts, lazy = _counts(path)
    assert counts["copied"] == ["weights.tw"]  # the one non-contiguous tensor
    assert len(counts["mapped"]) == len(archive.weights) + len(archive.constants) - 1
    for table in ("weights", "constants"):
        for name, (start, length) in lazy.spans[table].items():
            assert start % ALIGN == 0, (name, start, length)
    assert lazy.materialize() == archive  # the padding is dropped: what was written is read back
    assert torch.allclose(opwire.run_program(opwire.open(path), (x,)), expected)

    old = tmp_path / f"old.{codec}"  # as opwire wrote it before records 1.7: loads equal, with copies
    old.write_bytes(framing.write_header(codec, "OpwireArchive") + encode_payload(archive, codec))
    old_counts, old_lazy = _counts(old)
    assert len(old_counts["copied"]) > 1
    assert old_lazy.materialize() == archive
    assert torch.allclose(opwire.run_program(opwire.open(old), (x,)), expected)
    for table in ("weights", "constants"):
        for name, tv in getattr(archive, table).items():
            assert torch.equal(old_lazy.tensor(table, name), to_tensor(tv)), name


@pytest.mark.parametrize("codec", CODECS)
def test_both_engines_write_the_same_padded_bytes_and_the_fast_path_reads_them(
    codec: str, mixed: tuple[m.OpwireArchive, torch.Tensor, torch.Tensor]
) -> None:
    archive = mixed[0]
    fast = thrift.encode(archive, codec, engine="fastbinary")  # type: ignore[arg-type]
    assert thrift.encode(archive, codec, engine="python") == fast  # type: ignore[arg-type]
    for engine in ("fastbinary", "python"):
        assert thrift.decode(fast, m.OpwireArchive, codec, engine=engine) == archive  # type: ignore[arg-type]
    raw = thrift.encode(archive, codec, framed=False)  # type: ignore[arg-type]  # the framed bytes' tail
    assert fast.endswith(raw)
    found = tables.scan(raw, 0, codec, "raw", 10**9, 10**9)
    base = len(fast) - len(raw)
    assert all((base + e.data) % ALIGN == 0 and 0 <= e.pad_length < ALIGN for t in found.values() for e in t.values())


def _entry(data: bytes, codec: str, name: str) -> tables.Entry:
    header = framing.read_header(data)
    return tables.scan(data, header.offset, codec, "test", 10**9, 10**9)["weights"][name]


def _with_padding(data: bytes, codec: str, name: str, padding: bytes) -> bytes:
    """`data` with the padding of weight `name` replaced by `padding` (its length prefix rewritten)."""
    e = _entry(data, codec, name)
    assert e.pad >= 0 and len(padding) < 128
    prefix = struct.pack(">i", len(padding)) if codec == "binary" else bytes((len(padding),))
    width = 4 if codec == "binary" else 1
    return data[: e.pad] + prefix + padding + data[e.pad + width + e.pad_length :]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize(
    ("padding", "match"),
    [
        (bytes(64), r"at most 63 zero bytes was expected, got 64 bytes - at `weights.odd.padding`"),
        (b"\0\0\x07", r"at most 63 zero bytes was expected, got a non-zero byte - at `weights.odd.padding`"),
    ],
)
def test_a_padding_too_long_or_not_zero_is_a_decode_error(
    tmp_path: Path, codec: str, padding: bytes, match: str, mixed: tuple[m.OpwireArchive, torch.Tensor, torch.Tensor]
) -> None:
    bad = _with_padding(opwire.dumps(mixed[0], codec), codec, "odd", padding)  # type: ignore[arg-type]
    with pytest.raises(DecodeError, match=match):
        opwire.loads(bad, m.OpwireArchive, codec)  # type: ignore[arg-type]
    path = tmp_path / "bad"
    path.write_bytes(bad)
    with pytest.raises(DecodeError, match=match):
        opwire.open(path).pt2.tensors()  # type: ignore[union-attr]


@pytest.mark.parametrize("length", [0x7FFFFFF0, 300])
def test_a_padding_past_the_end_of_the_file_is_a_decode_error(
    tmp_path: Path, length: int, mixed: tuple[m.OpwireArchive, torch.Tensor, torch.Tensor]
) -> None:
    data = opwire.dumps(mixed[0], "binary")
    e = _entry(data, "binary", "lin.bias")
    path = tmp_path / "bad.binary"
    cut = e.pad + 4 + length // 2 if length < 1000 else len(data)  # a huge length, or a file cut inside the padding
    path.write_bytes((data[: e.pad] + struct.pack(">i", length) + data[e.pad + 4 :])[:cut])
    with pytest.raises(DecodeError, match=rf"string length {length} exceeds the \d+ bytes that remain.*`weights`"):
        opwire.open(path)
    with pytest.raises(DecodeError, match=rf"string length {length} exceeds"):
        opwire.loads(path.read_bytes(), m.OpwireArchive, "binary")


@pytest.mark.parametrize("codec", CODECS)
def test_a_padding_outside_an_archives_tables_is_refused(
    codec: str, mixed: tuple[m.OpwireArchive, torch.Tensor, torch.Tensor]
) -> None:
    padded = from_tensor(torch.ones(2)).model_copy(update={"padding": b"\0\0"})
    values = m.Values(values={"x": m.Value(as_list=[m.Value(as_tensor=padded)])})
    with pytest.raises(EncodeError, match=r"a padding is allowed only on .* at `values.x.as_list\[0\]"):
        opwire.dumps(values, codec)  # type: ignore[arg-type]
    with pytest.raises(EncodeError, match=r"at `values.x.as_list\[0\].as_tensor.padding`"):
        opwire.dumps(values, "json")
    written = framing.write_header(codec, "Values") + encode_payload(values, codec)  # as another writer could
    with pytest.raises(DecodeError, match=r"Values: a padding is allowed only on .* at `values.x"):
        opwire.loads(written, m.Values, codec)  # type: ignore[arg-type]
    as_json = b'{"values": {"x": {"as_tensor": %s}}}' % opwire.dumps(padded.model_copy(update={"padding": None}))
    assert b'"padding": null' in as_json  # JSON writes every optional field, as torch's writer does
    as_json = as_json.replace(b'"padding": null', b'"padding": "AAA="')
    with pytest.raises(DecodeError, match=r"at `values.x.as_tensor.padding`"):
        opwire.loads(as_json, m.Values, "json")
    trace_tensor = m.TraceTensor(name="t0", value=padded)
    with pytest.raises(DecodeError, match=r"TraceTensor: a padding is allowed only on .* at `value.padding`"):
        opwire.loads(framing.write_header(codec, "TraceTensor") + encode_payload(trace_tensor, codec), m.TraceTensor)
    with pytest.raises(DecodeError, match=r"TensorValue: a padding is allowed only on .* at `padding`"):
        opwire.loads(framing.write_header(codec, "TensorValue") + encode_payload(padded, codec), m.TensorValue)

    archive = mixed[0].model_copy(update={"example_args": [m.Value(as_tensor=padded)]})
    with pytest.raises(EncodeError, match=r"at `example_args\[0\].as_tensor.padding`"):
        opwire.dumps(archive, codec)  # type: ignore[arg-type]
    written = framing.write_header(codec, "OpwireArchive") + encode_payload(archive, codec)
    with pytest.raises(DecodeError, match=r"OpwireArchive: a padding is allowed only on .*`example_args\[0\]"):
        opwire.loads(written, m.OpwireArchive, codec)  # type: ignore[arg-type]


def test_a_padding_given_on_an_archives_tables_is_rewritten(
    mixed: tuple[m.OpwireArchive, torch.Tensor, torch.Tensor],
) -> None:
    """The writer decides the padding: one set on a table's tensor by the caller is replaced, not written as is."""
    archive = mixed[0]
    odd = archive.weights["odd"].model_copy(update={"padding": b"\x01" * 100})
    edited = archive.model_copy(update={"weights": {**archive.weights, "odd": odd}})
    assert opwire.dumps(edited, "compact") == opwire.dumps(archive, "compact")
