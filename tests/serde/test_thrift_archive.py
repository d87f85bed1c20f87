"""A compact or binary OpwireArchive file opened by path: payloads mapped (aligned ones viewed in place, unaligned ones
read once into their own tensor), the rest strictly decoded, and every hostile offset or length an opwire error."""

from __future__ import annotations

import ctypes
import struct
from pathlib import Path

import pytest
import torch
from torch import nn

import opwire
from opwire.errors import DecodeError
from opwire.schema import models as m
from opwire.serde import framing, thrift_archive, torch_bridge
from opwire.serde._thrift.encode import encode_payload
from opwire.serde.tensors import from_tensor

CODECS = ("binary", "compact")


class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(7, 5)
        self.tw = nn.Parameter(torch.randn(5, 5).t())  # non-contiguous
        self.register_buffer("dbl", torch.randn(5, dtype=torch.float64))
        self.register_buffer("cnt", torch.zeros(5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.cnt.add_(1)
        return (self.lin(x) @ self.tw + self.dbl.float() + self.cnt).sum(0)


@pytest.fixture(scope="module")
def net() -> tuple[m.OpwireArchive, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    module, x = _Net(), torch.randn(3, 7)
    ep = torch.export.export(module, (x,))
    return torch_bridge.archive_from_exported_program(ep), x, _Net.forward(module, x)


def _write(tmp_path: Path, archive: m.OpwireArchive, codec: str) -> Path:
    path = tmp_path / f"a.{codec}"
    path.write_bytes(opwire.dumps(archive, codec))  # type: ignore[arg-type]
    return path


def _base(archive: thrift_archive.ThriftArchive) -> int:
    return ctypes.addressof(ctypes.c_char.from_buffer(archive._buffer()))


@pytest.mark.parametrize("codec", CODECS)
def test_a_thrift_archive_file_runs_on_its_mapped_payloads(
    tmp_path: Path, codec: str, net: tuple[m.OpwireArchive, torch.Tensor, torch.Tensor]
) -> None:
    archive, x, _ = net
    path = _write(tmp_path, archive, codec)
    opened = opwire.open(path)
    lazy = opened.pt2
    assert isinstance(lazy, thrift_archive.ThriftArchive)
    expected = opwire.run_program(archive, (x,))
    assert torch.equal(opwire.run_program(opened, (x,)), expected)
    assert lazy.materialize() == archive
    weights, constants = lazy.tensors("cpu")
    base, size = _base(lazy), path.stat().st_size
    for table, tensors in (("weights", weights), ("constants", constants)):
        for name, t in tensors.items():
            start, _ = lazy.spans[table][name]
            assert torch.equal(t, opwire.serde.tensors.to_tensor(getattr(archive, table)[name])), name
            inside = base <= t.data_ptr() < base + size
            aligned_contiguous = start % t.element_size() == 0 and t.is_contiguous()
            assert inside == aligned_contiguous, (name, start, t.stride())  # views exactly the aligned ones
            if inside:
                assert t.data_ptr() - base == start
    t = weights["cnt"]
    t.add_(1)  # copy-on-write: the file is never written
    assert opwire.open(path).pt2.materialize() == archive  # type: ignore[union-attr]


def _write_unpadded(tmp_path: Path, archive: m.OpwireArchive, codec: str) -> Path:
    """The file opwire wrote before records 1.7: no padding, each payload wherever the bytes before it end."""
    path = tmp_path / f"old.{codec}"
    path.write_bytes(framing.write_header(codec, "OpwireArchive") + encode_payload(archive, codec))
    return path


def test_an_unaligned_payload_is_read_into_its_own_tensor(tmp_path: Path) -> None:
    """In a file without padding, payload offsets depend on what comes before: shifting a name by one byte moves
    every payload after it."""
    w = torch.arange(12.0).reshape(3, 4)
    base = torch_bridge.archive_from_exported_program(torch.export.export(nn.Linear(2, 2), (torch.ones(1, 2),)))
    starts = set()
    for pad in range(4):
        edited = base.model_copy(update={"weights": {**base.weights, "p" * pad: from_tensor(w)}})
        path = _write_unpadded(tmp_path, edited, "binary")
        lazy = thrift_archive.open(path)
        start = lazy.spans["weights"]["p" * pad][0]
        starts.add(start % 4)
        got = lazy.tensor("weights", "p" * pad)
        assert torch.equal(got, w)
        assert (_base(lazy) <= got.data_ptr() < _base(lazy) + path.stat().st_size) == (start % 4 == 0)
    assert len(starts) == 4  # every alignment was seen


def _payload(path: Path, table: str, name: str) -> tuple[int, int]:
    return thrift_archive.open(path).spans[table][name]


@pytest.mark.parametrize(
    ("length", "match"),
    [
        (0x7FFFFFFF, r"string length 2147483647 exceeds the \d+ bytes that remain"),
        (-1, r"negative string length -1"),
    ],
)
def test_a_hostile_payload_length_is_a_decode_error(
    tmp_path: Path, net: tuple[m.OpwireArchive, torch.Tensor, torch.Tensor], length: int, match: str
) -> None:
    path = _write(tmp_path, net[0], "binary")
    start, _ = _payload(path, "weights", "lin.weight")
    data = bytearray(path.read_bytes())
    data[start - 4 : start] = struct.pack(">i", length)
    path.write_bytes(bytes(data))
    with pytest.raises(DecodeError, match=match) as info:
        opwire.open(path)
    assert str(path) in str(info.value) and "weights" in str(info.value)


def test_a_payload_shorter_than_its_shape_is_a_decode_error(
    tmp_path: Path, net: tuple[m.OpwireArchive, torch.Tensor, torch.Tensor]
) -> None:
    archive = net[0]
    short = archive.weights["lin.weight"].model_copy(update={"data": b"\0" * 8})
    path = _write(tmp_path, archive.model_copy(update={"weights": {**archive.weights, "lin.weight": short}}), "compact")
    lazy = thrift_archive.open(path)
    with pytest.raises(DecodeError, match=r"Expected 140 bytes of data .*got 8 - at `weights\['lin.weight'\]"):
        lazy.tensor("weights", "lin.weight")


def test_a_truncated_archive_and_a_repeated_name_are_decode_errors(
    tmp_path: Path, net: tuple[m.OpwireArchive, torch.Tensor, torch.Tensor]
) -> None:
    path = _write(tmp_path, net[0], "binary")
    data = path.read_bytes()
    start, length = _payload(path, "weights", "lin.weight")
    path.write_bytes(data[: start + length // 2])
    with pytest.raises(DecodeError, match=r"string length 140 exceeds the 70 bytes that remain"):
        opwire.open(path)
    key = data.rindex(b"\x00\x00\x00\x03cnt")  # the last one: the weights map's key (the program names it first)
    path.write_bytes(data[:key] + b"\x00\x00\x00\x03dbl" + data[key + 7 :])
    with pytest.raises(DecodeError, match=r"the name 'dbl' twice - in `weights` of the OpwireArchive"):
        opwire.open(path)


def test_a_file_changed_after_opening_is_refused(
    tmp_path: Path, net: tuple[m.OpwireArchive, torch.Tensor, torch.Tensor]
) -> None:
    path = _write(tmp_path, net[0], "compact")
    lazy = thrift_archive.open(path)
    with path.open("ab") as f:
        f.write(b"\0")
    with pytest.raises(DecodeError, match=r"it changed while open - open it again"):
        lazy.tensors()


def test_max_bytes_still_bounds_an_archive_opened_by_path(
    tmp_path: Path, net: tuple[m.OpwireArchive, torch.Tensor, torch.Tensor]
) -> None:
    path = _write(tmp_path, net[0], "compact")
    with pytest.raises(DecodeError, match=r"the archive has bytes: \d+ exceeds the budget max_bytes=100"):
        opwire.open(path, max_bytes=100)


def test_a_tensor_with_two_data_fields_is_a_decode_error(
    tmp_path: Path, net: tuple[m.OpwireArchive, torch.Tensor, torch.Tensor]
) -> None:
    """Two `data` fields in one TensorValue: which bytes it means is ambiguous, so the mapped reader refuses it."""
    path = _write(tmp_path, net[0], "binary")
    data = path.read_bytes()
    pos, length = _payload(path, "weights", "lin.bias")
    field = data[pos - 7 : pos + length]
    assert field[:3] == b"\x0b\x00\x46"  # binary: type string, field id 70, then the i32 length
    path.write_bytes(data[: pos + length] + field + data[pos + length :])
    with pytest.raises(DecodeError, match=r"weights\['lin.bias'\] has two data fields - in `weights`"):
        opwire.open(path)
