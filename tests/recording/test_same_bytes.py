"""Replayed values compared with a streamed trace's stored payload byte for byte, before any payload is rebuilt."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch

import opwire
from opwire.recording import payloads
from opwire.recording.compare import Errors, compare_tensor
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


def _last_bit_flipped(t: torch.Tensor) -> torch.Tensor:
    out = t.clone()
    out.view(torch.int32)[-1] ^= 1  # the lowest bit of the last element: within any tolerance, other bytes
    return out


_TRICKY = {  # recorded value, a replayed value that torch.equal or allclose may take for it, but whose bytes differ
    "negative_zero": (torch.tensor([0.0, 1.0, 2.0]), torch.tensor([-0.0, 1.0, 2.0])),
    "nan_payload": (torch.tensor([float("nan"), 1.0]), torch.tensor([1.0, 1.0]).log().div(0.0).nan_to_num(1.0)),
    "last_bit": (torch.arange(1000, dtype=torch.float32), _last_bit_flipped(torch.arange(1000, dtype=torch.float32))),
    "perturbed": (
        torch.arange(1000, dtype=torch.float32),
        torch.arange(1000, dtype=torch.float32).index_fill(0, torch.tensor([999]), 999.5),
    ),
    "same_bits_other_dtype": (
        torch.arange(4, dtype=torch.int32),
        torch.arange(4, dtype=torch.int32).view(torch.float32),
    ),
}


@pytest.mark.parametrize("memcmp", [True, False], ids=["memcmp", "copied"])
@pytest.mark.parametrize("case", sorted(_TRICKY))
def test_only_the_very_bytes_are_the_same_bytes(
    case: str, memcmp: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The byte check declares equality for the recorded bits only: -0.0 for 0.0, another value in the last byte,
    the same bits under another dtype are all left to the numeric comparison (with and without the C memcmp)."""
    if not memcmp:
        monkeypatch.setattr(payloads, "_MEMCMP", None)
    recorded, other = _TRICKY[case]
    name = _alias_trace(recorded, tmp_path / "t.trace")
    src = open_source(tmp_path / "t.trace")
    assert src.same_bytes(name, src.load(name))
    assert src.same_bytes(name, recorded.clone())
    assert not src.same_bytes(name, other)


def test_a_nan_with_the_recorded_bits_is_the_same_bytes(tmp_path: Path) -> None:
    recorded = torch.tensor([float("nan"), -float("inf"), 3.0])
    name = _alias_trace(recorded, tmp_path / "t.trace")
    src = open_source(tmp_path / "t.trace")
    assert src.same_bytes(name, recorded.clone())  # torch.equal says no (NaN != NaN); the bytes say yes
    assert not torch.equal(recorded, recorded.clone())


@pytest.mark.parametrize("case", sorted(_TRICKY))
def test_what_the_bytes_decline_the_numeric_comparison_decides(case: str, tmp_path: Path) -> None:
    """`compare_tensor` with the byte check (as the replay calls it): -0.0 for 0.0 agrees by value, a NaN or a
    changed last element beyond the tolerance is a value difference (within it, agreement with the difference
    counted), the same bits under another dtype a dtype difference."""
    recorded, other = _TRICKY[case]
    name = _alias_trace(recorded, tmp_path / "t.trace")
    src = open_source(tmp_path / "t.trace")
    want = src.meta(name)
    assert want is not None
    diff = compare_tensor(
        other, want, None, None, True, lambda: src.load(name), None, lambda t: src.same_bytes(name, t)
    )
    kinds = {"negative_zero": None, "nan_payload": "value", "last_bit": None, "perturbed": "value"}
    kinds["same_bits_other_dtype"] = "dtype"
    assert (diff.kind if diff is not None else None) == kinds[case]
    errors = Errors()
    compare_tensor(other, want, None, None, True, lambda: src.load(name), errors, lambda t: src.same_bytes(name, t))
    assert (errors.abs > 0) == (case in ("last_bit", "perturbed"))  # the numbers were compared, not the bytes
    assert (
        compare_tensor(recorded.clone(), want, None, None, True, None, None, lambda t: src.same_bytes(name, t)) is None
    )
