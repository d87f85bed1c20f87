"""Values in shared memory between the persistent isolated child and its parent: raw tensor bytes in a memfd, and
a small JSON layout (dtype, shape, offset) sent on a pipe.

The parent reads what the child wrote as data from a process assumed compromised: every layout entry is checked
(kind, dtype from a fixed table, shape, byte count, bounds within the region the parent itself sized) and the
bytes are copied out at once, so nothing the child does later changes a returned tensor.
"""

from __future__ import annotations

import fcntl
import math
import mmap
import os
from collections.abc import Sequence
from typing import Any

import torch

from opwire.errors import EncodeError, KernelError

__all__ = ["Region", "layout", "read", "store"]

_DTYPES: dict[str, torch.dtype] = {
    str(d).removeprefix("torch."): d
    for d in (
        torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.int16, torch.int32,
        torch.int64, torch.uint8, torch.bool, torch.complex64, torch.complex128,
    )
}  # fmt: skip
_ALIGN = 64
_MAX_VALUES = 1 << 16
_MAX_DIMS = 64

Entry = dict[str, Any]


class Region:
    """A memfd mapped shared: the parent sizes it, the child maps it (it cannot resize it under the filter)."""

    def __init__(self, name: str) -> None:
        self.fd = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        fcntl.fcntl(self.fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK)  # the child cannot make the parent's reads fault
        self.cap = 0
        self.buf: mmap.mmap | None = None

    def ensure(self, size: int) -> None:
        """At least `size` bytes (grown to the next power of two)."""
        if size <= self.cap and self.buf is not None:
            return
        cap = max(1 << 16, 1 << max(0, size - 1).bit_length())
        os.ftruncate(self.fd, cap)
        self.map(cap)

    def map(self, cap: int) -> None:
        """Map the first `cap` bytes (the child, after the parent grew the region)."""
        if self.buf is not None:
            self.buf.close()
        self.buf = mmap.mmap(self.fd, cap, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        self.cap = cap

    def close(self) -> None:
        """Unmap and close."""
        if self.buf is not None:
            self.buf.close()
            self.buf = None
        os.close(self.fd)


def layout(values: Sequence[Any], where: str) -> tuple[list[Entry], int]:
    """The layout entry of each value and the bytes they take (tensors: CPU, any dtype of the table)."""
    entries: list[Entry] = []
    pos = 0
    for i, v in enumerate(values):
        if isinstance(v, torch.Tensor):
            name = str(v.dtype).removeprefix("torch.")
            if name not in _DTYPES or v.device.type != "cpu" or v.layout != torch.strided:
                raise EncodeError(f"{where}[{i}]: a {v.dtype} tensor on {v.device} cannot cross to the isolated child")
            n = v.numel() * v.element_size()
            entries.append({"k": "t", "dtype": name, "shape": list(v.shape), "off": pos, "n": n})
            pos += -(-n // _ALIGN) * _ALIGN
        elif v is None or isinstance(v, bool | int | float):
            entries.append({"k": "v", "v": v})
        else:
            raise EncodeError(f"{where}[{i}]: a {type(v).__name__} cannot cross to the isolated child (tensors, "
                              "numbers, bools and None can)")  # fmt: skip
    return entries, pos


def store(buf: mmap.mmap, values: Sequence[Any], entries: Sequence[Entry]) -> None:
    """Copy the tensors of `values` into `buf` where `entries` place them."""
    for v, e in zip(values, entries, strict=True):
        if e["k"] == "t" and e["n"]:
            dst = torch.frombuffer(buf, dtype=torch.uint8, count=e["n"], offset=e["off"])
            dst.copy_(v.detach().contiguous().reshape(-1).view(torch.uint8))


def read(buf: mmap.mmap | None, entries: Any, cap: int, where: str, copy: bool = True) -> list[Any]:
    """The values `entries` describe, copied out of `buf` (every entry checked: a malformed one is a KernelError);
    `copy=False` (the child reading its parent's inputs) gives views of `buf` instead."""
    if not isinstance(entries, list) or len(entries) > _MAX_VALUES:
        raise KernelError(
            f"{where}: expected a list of at most {_MAX_VALUES} value layouts, got {type(entries).__name__}"
        )
    return [_value(buf, e, cap, f"{where}[{i}]", copy) for i, e in enumerate(entries)]


def _value(buf: mmap.mmap | None, e: Any, cap: int, where: str, copy: bool) -> Any:
    if not isinstance(e, dict) or e.get("k") not in ("t", "v"):
        raise KernelError(f"{where}: expected a value layout {{'k': 't' | 'v', ...}}, got {str(e)[:80]!r}")
    if e["k"] == "v":
        v = e.get("v")
        if v is None or isinstance(v, bool | int | float):
            return v
        raise KernelError(f"{where}: expected a number, a bool or None, got {type(v).__name__}")
    dtype = _DTYPES.get(str(e.get("dtype")))
    raw_shape, off, n = e.get("shape"), e.get("off"), e.get("n")
    if dtype is None:
        raise KernelError(f"{where}: expected a dtype of {sorted(_DTYPES)}, got {str(e.get('dtype'))[:40]!r}")
    dims: list[Any] = raw_shape if isinstance(raw_shape, list) else [None]
    if len(dims) > _MAX_DIMS or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in dims):
        raise KernelError(f"{where}: expected a shape of at most {_MAX_DIMS} sizes >= 0, got {str(raw_shape)[:80]}")
    shape = [int(d) for d in dims]
    size = math.prod(shape) * dtype.itemsize
    if not (isinstance(off, int) and isinstance(n, int) and n == size and 0 <= off and off + n <= cap):
        raise KernelError(f"{where}: a {dtype} tensor of shape {shape} takes {size} bytes; the layout says {n} at "
                          f"offset {off} of a {cap}-byte region")  # fmt: skip
    if n == 0 or buf is None:
        return torch.empty(shape, dtype=dtype)
    raw = torch.frombuffer(buf, dtype=torch.uint8, count=n, offset=off)
    return (raw.clone() if copy else raw).view(dtype).reshape(shape)
