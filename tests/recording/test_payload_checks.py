"""Streamed payloads pass the same layout and device checks as inline ones (serde.tensors)."""

from __future__ import annotations

import pytest

from opwire.errors import DecodeError
from opwire.recording.payloads import rebuild_span
from opwire.schema import models as m


def _meta(**kw: object) -> m.TensorValue:
    fields: dict[str, object] = dict(
        dtype=m.ScalarType.FLOAT, sizes=[2], strides=[1], storage_offset=0,
        device=m.Device(type="cpu"), requires_grad=False, data=b"",
    )  # fmt: skip
    fields.update(kw)
    return m.TensorValue(**fields)  # type: ignore[arg-type]


def _fill(buf: memoryview) -> None:
    buf[:] = bytes(len(buf))


def test_a_streamed_payload_on_a_dataless_device_is_refused_before_allocation() -> None:
    with pytest.raises(DecodeError, match=r"device 'meta' holds no data.* - at `t`"):
        rebuild_span(_meta(device=m.Device(type="meta")), 8, _fill, None, "t")


def test_a_streamed_payload_whose_numel_overflows_i64_is_refused() -> None:
    with pytest.raises(DecodeError, match="numel and byte span fit in 64 bits"):
        rebuild_span(_meta(sizes=[2**62, 2**62], strides=[2**62, 1]), 8, _fill, None, "t")


def test_a_streamed_payload_rebuilds_on_a_checked_device() -> None:
    t = rebuild_span(_meta(), 8, _fill, "cpu", "t")
    assert t.tolist() == [0.0, 0.0]
