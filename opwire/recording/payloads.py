"""Tensor payloads of a trace: full TensorValues, digests, and the storage spans of streamed traces.

A streamed trace stores a tensor's bytes as the *storage span* its layout reaches: the elements from
`storage_offset` to the last one its sizes and strides touch, in storage order. A transposed view and
its base then share one span (and one payload), and the bytes move from the tensor's memory to the file
without a copy or per-element Python work.
"""

from __future__ import annotations

import ctypes
import hashlib
import math
import os
import sys
from collections.abc import Callable, Container
from typing import Any

import torch

from opwire.errors import DecodeError, EncodeError
from opwire.schema import models as m
from opwire.serde import tensors

__all__ = [
    "ByteCheck",
    "Scratch",
    "Span",
    "check_span",
    "digest_of",
    "layout_of",
    "rebuild_span",
    "rebuild_undefined",
    "span_address",
    "span_equals",
    "span_of",
    "tensor_value",
]

_SLACK_BYTES = 64 << 20
_SCRATCH_BYTES = 1 << 20  # payload bytes read per piece by a byte check (a reader's reused buffer)


def digest_of(t: torch.Tensor, data: bytes | None = None) -> m.TensorDigest:
    """SHA-256 of the row-major little-endian bytes, plus min/max/mean and NaN/inf counts."""
    if data is None:
        data = tensors.from_tensor(t.detach(), "digest").data
    flat = t.detach().reshape(-1)
    stats: dict[str, float] = {}
    nan = inf = 0
    if flat.numel() and flat.dtype.is_floating_point:
        f = flat.to(torch.float64)
        finite = f[torch.isfinite(f)]
        nan = int(torch.isnan(f).sum())
        inf = int(torch.isinf(f).sum())
        if finite.numel():
            stats = {"min": float(finite.min()), "max": float(finite.max()), "mean": float(finite.mean())}
    elif flat.numel() and not flat.dtype.is_complex and flat.dtype != torch.bool:
        f = flat.to(torch.float64)
        stats = {"min": float(f.min()), "max": float(f.max()), "mean": float(f.mean())}
    stats = {k: v for k, v in stats.items() if math.isfinite(v)}
    return m.TensorDigest(sha256=hashlib.sha256(data).hexdigest(), nan_count=nan, inf_count=inf, **stats)


def tensor_value(t: torch.Tensor, full: bool, where: str = "tensor") -> m.TensorValue:
    """The TensorValue of `t`: with its bytes when `full`, else with a digest and empty data."""
    try:
        tv = tensors.from_tensor(t.detach(), where)
    except RuntimeError as exc:  # torch refusing a layout must not lose the recording: the call is skipped
        raise EncodeError(f"cannot serialize the tensor: {exc} - at `{where}`", where) from None
    if full:
        return tv.model_copy(update={"requires_grad": bool(t.requires_grad)})
    return tv.model_copy(update={"requires_grad": bool(t.requires_grad), "data": b"", "digest": digest_of(t, tv.data)})


class Span:
    """The storage span of a tensor: its metadata (data empty) and a zero-copy view of the span's bytes."""

    __slots__ = ("buffer", "key", "meta", "nbytes", "owner")

    def __init__(self, meta: m.TensorValue, owner: torch.Tensor, nbytes: int) -> None:
        self.meta, self.owner, self.nbytes = meta, owner, nbytes
        start = int(owner.storage_offset()) * owner.element_size()
        ptr = int(owner.untyped_storage().data_ptr()) + start if nbytes else 0
        self.key = (ptr, nbytes, owner.dtype)
        self.buffer: memoryview = (
            memoryview((ctypes.c_char * nbytes).from_address(ptr)).cast("B") if nbytes else memoryview(b"")
        )


def span_of(t: torch.Tensor, where: str = "tensor") -> Span:
    """The span of `t` (a copy only when `t` is not a plain CPU tensor: another device, conj or neg bit)."""
    if not isinstance(t, torch.Tensor):
        raise EncodeError(f"Expected a torch.Tensor, got {type(t).__name__} - at `{where}`", where)
    if t.layout != torch.strided:
        raise EncodeError(f"Expected a strided tensor, got layout {t.layout} - at `{where}`", where)
    if t.device.type == "meta" or type(t).__name__ == "FakeTensor":
        raise EncodeError(f"Expected a tensor with data, got a {t.device.type} tensor without it - at `{where}`", where)
    if sys.byteorder != "little":
        raise EncodeError(f"streamed traces are written on little-endian hosts - at `{where}`", where)
    meta = layout_of(t, where)
    try:
        owner = t.detach()
        if owner.device.type != "cpu" or owner.is_conj() or owner.is_neg():
            owner = _cpu_like(owner)
        offset = int(owner.storage_offset())
        count = max(tensors.storage_extent(list(owner.shape), list(owner.stride()), offset) - offset, 0)
        return Span(meta, owner, count * owner.element_size())
    except RuntimeError as exc:
        raise EncodeError(f"cannot serialize the tensor: {exc} - at `{where}`", where) from None


def layout_of(t: torch.Tensor, where: str = "tensor") -> m.TensorValue:
    """`t`'s metadata as a TensorValue with empty data (dtype, sizes, strides, offset, device, requires_grad)."""
    return m.TensorValue(
        dtype=tensors.scalar_type_of(t.dtype, where),
        sizes=list(t.shape),
        strides=list(t.stride()),
        storage_offset=int(t.storage_offset()),
        device=m.Device(type=t.device.type, index=t.device.index),
        requires_grad=bool(t.requires_grad),
        data=b"",
    )


def _cpu_like(t: torch.Tensor) -> torch.Tensor:
    """A plain CPU tensor with `t`'s values and layout (sizes, strides, storage offset)."""
    values = t.resolve_conj().resolve_neg().to("cpu")
    extent = tensors.storage_extent(list(t.shape), list(t.stride()), int(t.storage_offset()))
    base = torch.zeros(max(extent, 1), dtype=t.dtype)
    view = base.as_strided(t.shape, t.stride(), t.storage_offset())
    if t.numel() and torch._debug_has_internal_overlap(view) == 0:
        view.copy_(values)
    elif t.numel():  # overlapping layout (expanded): write each storage position once
        positions = torch.arange(max(extent, 1)).as_strided(t.shape, t.stride(), t.storage_offset()).reshape(-1)
        base[positions] = values.reshape(-1)
    return view


def check_span(meta: m.TensorValue, payload_bytes: int, where: str) -> tuple[torch.dtype, int]:
    """Validate a streamed tensor's layout against its payload length; (dtype, span elements)."""
    dtype = tensors.torch_dtype(meta.dtype, f"{where}.dtype")
    tensors.check_shape(meta, dtype, where)
    sizes, strides, offset = list(meta.sizes), list(meta.strides), meta.storage_offset
    extent = tensors.storage_extent(sizes, strides, offset)
    count = max(extent - offset, 0)
    if count * dtype.itemsize != payload_bytes:
        raise DecodeError(
            f"Expected a payload of {count * dtype.itemsize} bytes for this layout ({count} elements of {dtype}), "
            f"got {payload_bytes} - at `{where}`; the trace is corrupt",
            where,
        )
    if offset * dtype.itemsize > tensors.MAX_STORAGE_SLACK * payload_bytes + _SLACK_BYTES:
        raise DecodeError(
            f"Expected a storage_offset that fits the payload, got {offset} elements before a payload of "
            f"{payload_bytes} bytes - at `{where}`; refusing to allocate it",
            where,
        )
    return dtype, count


def rebuild_span(
    meta: m.TensorValue, payload_bytes: int, fill: Callable[[memoryview], None], device: Any, where: str
) -> torch.Tensor:
    """The tensor `meta` describes, its span filled in place by `fill(buffer)` (one copy from the file)."""
    dtype, count = check_span(meta, payload_bytes, where)
    target = tensors.target_device(meta, device, where)  # checked before anything is allocated
    offset = meta.storage_offset
    base = torch.empty(offset + count, dtype=dtype)
    if offset:
        base[:offset].zero_()
    if count:
        ptr = base.data_ptr() + offset * dtype.itemsize
        fill(memoryview((ctypes.c_char * payload_bytes).from_address(ptr)).cast("B"))
    out = base.as_strided(list(meta.sizes), list(meta.strides), offset)
    return tensors.place(out, target, bool(meta.requires_grad), where)


def span_address(t: Any, meta: m.TensorValue, size: int) -> int | None:
    """The address of the `size` bytes of `t`'s storage a payload of layout `meta` holds, or None when `t` is not a
    plain CPU tensor of exactly that dtype, layout and payload size: what `rebuild_span(meta, size, ...)` fills."""
    if type(t) is not torch.Tensor or t.layout is not torch.strided or t.device.type != "cpu":
        return None
    if t.dtype is not tensors.TORCH_DTYPES.get(meta.dtype) or t.is_conj() or t.is_neg():  # None: an unknown dtype
        return None
    sizes, strides, offset = meta.sizes, meta.strides, meta.storage_offset
    if t.storage_offset() != offset or t.stride() != tuple(strides) or t.shape != tuple(sizes):
        return None
    count, item = max(tensors.storage_extent(sizes, strides, offset) - offset, 0), t.element_size()
    if not count or count * item != size or t.untyped_storage().nbytes() < (offset + count) * item:
        return None
    return int(t.data_ptr())


def span_equals(t: Any, meta: m.TensorValue, data: bytes) -> bool:
    """Whether `t` holds exactly `data` (a payload of layout `meta`) in its span (`span_address`): compared in place
    where the C library's memcmp is at hand, else copied out and compared."""
    at = span_address(t, meta, len(data))
    return at is not None and _equal_at(at, data)


def _equal_at(at: int, data: bytes) -> bool:
    """Whether the `len(data)` bytes at address `at` are `data` (memcmp in place where the C library is at hand)."""
    if _MEMCMP is None:
        return ctypes.string_at(at, len(data)) == data
    return bool(_MEMCMP(at, data, len(data)) == 0)


class Scratch:
    """A reused buffer a reader reads payload bytes into to compare them (`ByteCheck`): no allocation, and no fresh
    pages to fault in, per read."""

    __slots__ = ("address", "size", "view")

    def __init__(self, size: int = _SCRATCH_BYTES) -> None:
        buffer = bytearray(size)
        self.view, self.size = memoryview(buffer), size
        self.address = ctypes.addressof((ctypes.c_char * size).from_buffer(buffer))


class ByteCheck:
    """The byte check of one stored payload, planned ahead (`TraceReader.byte_check`): its layout and its place in
    the file known, `holds(t, values)` is a few attribute reads, then reads of the payload into a reused buffer
    (`Scratch`) each compared in place with the tensor's memory (memcmp).

    True only where `compare_tensor(t, meta, values=values, same=<the reader's same_bytes>)` finds no difference
    (the same dtype, shape, strides and offset; with `values`, the payload's bytes in `t`'s span, as `span_equals`
    compares them). False decides nothing: the caller takes that full path, which reports whatever differs as before
    (another dtype with the same bits, NaN, -0.0, a corrupt or cut payload, a tensor subclass or another device)."""

    __slots__ = ("at", "dtype", "end", "fileno", "gone", "name", "offset", "scratch", "size", "sizes", "strides")

    def __init__(
        self, name: str, meta: m.TensorValue, dtype: torch.dtype, count: int, fileno: Callable[[], int], at: int,
        size: int, scratch: Scratch, gone: Container[str],
    ) -> None:  # fmt: skip
        self.name, self.dtype, self.gone = name, dtype, gone
        self.sizes, self.strides, self.offset = tuple(meta.sizes), tuple(meta.strides), meta.storage_offset
        self.end = (self.offset + count) * dtype.itemsize  # the storage bytes the span reaches
        self.fileno, self.at, self.size, self.scratch = fileno, at, size, scratch

    def holds(self, t: Any, values: bool) -> bool:
        """Whether `t` matches the recorded layout and (with `values`) holds the payload byte for byte."""
        if type(t) is not torch.Tensor or t.layout is not torch.strided or self.name in self.gone:
            return False
        if t.dtype is not self.dtype or t.shape != self.sizes or t.stride() != self.strides:
            return False
        if t.storage_offset() != self.offset:
            return False
        if not values:
            return True
        if not t.is_cpu or t.is_conj() or t.is_neg() or t.untyped_storage().nbytes() < self.end:
            return False
        fd, at, left, ptr = self.fileno(), self.at, self.size, int(t.data_ptr())
        if _MEMCMP_AT is None or not _PREADV:
            data = os.pread(fd, left, at)  # no seek: the reader seeks before each of its reads
            return len(data) == left and _equal_at(ptr, data)
        scratch = self.scratch
        while left:  # in pieces of the scratch buffer's size: a file cut since reads short, and the check declines
            n = min(left, scratch.size)
            if os.preadv(fd, [scratch.view[:n]], at) != n or _MEMCMP_AT(ptr, scratch.address, n):
                return False
            at, ptr, left = at + n, ptr + n, left - n
        return True


def _memcmp(second: Any = ctypes.c_char_p) -> Any:
    """The C library's memcmp through ctypes, its second argument a `second` (None where the process has no C
    library to look it up in)."""
    try:
        fn = ctypes.CDLL(None).memcmp
    except (OSError, AttributeError, TypeError):
        return None
    fn.argtypes, fn.restype = (ctypes.c_void_p, second, ctypes.c_size_t), ctypes.c_int
    return fn


_MEMCMP = _memcmp()  # (address, bytes, length)
_MEMCMP_AT = _memcmp(ctypes.c_void_p)  # (address, address, length)
_PREADV = hasattr(os, "preadv")


def rebuild_undefined(meta: m.TensorValue, max_bytes: int, device: Any, where: str) -> torch.Tensor:
    """The tensor `meta` describes for a value whose content is undefined (no payload): zeros in its layout.

    A DecodeError when the storage it needs is above `max_bytes` (a file cannot make opwire allocate more than a
    bounded multiple of its own size).
    """
    dtype = tensors.torch_dtype(meta.dtype, f"{where}.dtype")
    tensors.check_shape(meta, dtype, where)
    extent = tensors.storage_extent(list(meta.sizes), list(meta.strides), meta.storage_offset)
    if extent * dtype.itemsize > max_bytes:
        raise DecodeError(
            f"Expected an undefined tensor of at most {max_bytes} bytes for this file, got a layout needing "
            f"{extent * dtype.itemsize} bytes - at `{where}`; refusing to allocate it",
            where,
        )
    target = tensors.target_device(meta, device, where)
    base = torch.zeros(extent, dtype=dtype)
    out = base.as_strided(list(meta.sizes), list(meta.strides), meta.storage_offset)
    return tensors.place(out, target, bool(meta.requires_grad), where)
