"""Replayed values compared with a streamed trace's stored payload byte for byte, before any payload is rebuilt."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch

import opwire
from opwire.recording.frames import open_source
from opwire.recording.source import StreamSource

_LAYOUTS: dict[str, Callable[[], torch.Tensor]] = {
    "contiguous": lambda: torch.arange(12.0).reshape(3, 4),
    "transposed": lambda: torch.arange(12.0).reshape(3, 4).t(),
    "offset": lambda: torch.arange(20.0)[5:11],
    "strided": lambda: torch.arange(20.0)[::3],
    "zero_stride": lambda: torch.arange(3.0).reshape(3, 1).expand(3, 4),
}


def _alias_trace(value: torch.Tensor, path: Path) -> str:
    """Record `aten::alias` of `value` into a streamed trace at `path`; the name of its output."""
    with opwire.record(path=path) as trace:
        torch.ops.aten.alias.default(value)
    rec = next(r for r in trace.records if r.target == "aten::alias.default")
    return str(rec.outputs[0].value.name)


@pytest.mark.parametrize("layout", sorted(_LAYOUTS))
@pytest.mark.parametrize("reader", [open_source, StreamSource])
def test_the_recorded_value_is_the_same_bytes_and_a_changed_one_is_not(
    layout: str, reader: Callable[[Path], object], tmp_path: Path
) -> None:
    name = _alias_trace(_LAYOUTS[layout](), tmp_path / "t.trace")
    src = reader(tmp_path / "t.trace")
    assert isinstance(src, StreamSource)
    value = src.load(name)
    assert src.same_bytes(name, value)
    changed = src.load(name)
    changed.as_strided((1,), (1,)).add_(1)  # its first element
    assert not src.same_bytes(name, changed)
    if not value.is_contiguous():
        assert not src.same_bytes(name, value.contiguous())  # another layout: not compared
    assert not src.same_bytes(name, value.to(torch.float64))  # another dtype
    assert not src.same_bytes("no such tensor", value)
    src.replace(name, value + 1)
    assert not src.same_bytes(name, value)  # a replaced tensor is no longer the file's payload


def test_a_conjugate_view_is_never_taken_for_its_bytes(tmp_path: Path) -> None:
    value = torch.tensor([1 + 2j, 3 - 1j])
    name = _alias_trace(value, tmp_path / "t.trace")
    src = open_source(tmp_path / "t.trace")
    assert src.same_bytes(name, src.load(name))
    assert not src.same_bytes(name, src.load(name).conj())  # same memory, other values


def test_a_corrupt_payload_still_fails_the_replay(tmp_path: Path) -> None:
    """Bytes that match the replayed value need no SHA-256; a corrupt payload differs from it, is then read and
    hashed, and the replay reports it unreadable as before."""
    path = tmp_path / "t.trace"
    x = torch.linspace(-2, 2, 16)
    with opwire.record(path=path):
        torch.tanh(x)
    data = bytearray(path.read_bytes())
    at = data.find(torch.tanh(x).numpy().tobytes())
    assert at > 0
    data[at + 5] ^= 0xFF
    path.write_bytes(bytes(data))
    report = opwire.replay(path)
    assert [(x.op, x.kind) for x in report.mismatches] == [("aten::tanh.default", "missing")]
    assert "do not match its SHA-256" in report.mismatches[0].detail
    assert opwire.replay(path, mode="chained").mismatches[0].kind == "missing"
