"""Tensors viewed over a memory-mapped file or an inflated buffer, after every check a view needs.

`MappedFile` maps a whole regular file once, copy-on-write (`mmap.ACCESS_COPY`, i.e. MAP_PRIVATE): a write
through a tensor lands in a private page of this process and never reaches the file. `view_tensor` makes
a tensor over `length` bytes at `start` of a buffer (the mapping, or a bytearray a deflated entry was
inflated into) only after checking the dtype, sizes/strides/offset (signs, 64-bit fit), that the view
stays inside those bytes, and that `start` is aligned for the dtype. Nothing is read or copied: pages
come in when an op touches them. See SECURITY.md ("Mapped files") for truncation while mapped (SIGBUS).
"""

from __future__ import annotations

import mmap
import os
import stat
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from opwire.errors import DecodeError
from opwire.schema import models as m

if TYPE_CHECKING:
    import torch

__all__ = ["MAPPABLE", "Buffer", "MappedFile", "TensorLayout", "view_tensor"]

Buffer = mmap.mmap | bytearray
"""The bytes a tensor views: a file mapping, or a bytearray an entry was inflated or copied into."""

#: whether this host can view little-endian file bytes in place (big-endian hosts copy and swap)
MAPPABLE = sys.byteorder == "little"


class MappedFile:
    """A regular file mapped read-only-to-disk (copy-on-write), with its size taken at open."""

    def __init__(self, path: str | Path, expect_size: int | None = None) -> None:
        self.path = str(path)
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise DecodeError(f"{self.path}: not a regular file; only regular files are mapped")
            if expect_size is not None and st.st_size != expect_size:
                raise DecodeError(
                    f"{self.path}: the file is {st.st_size} bytes now, {expect_size} when it was opened; "
                    "it changed while open - open it again"
                )
            self.size = st.st_size
            self.buffer: Buffer = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY) if st.st_size else bytearray()

    def check(self) -> None:
        """DecodeError if the file's size changed since it was mapped (a truncated mapping faults with SIGBUS)."""
        try:
            size = os.stat(self.path).st_size
        except OSError as exc:
            raise DecodeError(f"{self.path}: cannot stat the mapped file ({exc.strerror or exc})") from None
        self._check_size(size)

    def _check_size(self, size: int) -> None:
        if size != self.size:
            raise DecodeError(
                f"{self.path}: the file is {size} bytes now, {self.size} when it was opened; it changed while "
                "open - open it again"
            )

    def region(self, start: int, length: int) -> tuple[Buffer, int]:
        """A separate copy-on-write mapping of `length` bytes at `start` (pages of its own): (buffer, start in it).

        For a tensor that must not share memory with another one viewing the same bytes."""
        if length == 0:
            return bytearray(), 0
        base = start - start % mmap.ALLOCATIONGRANULARITY
        with open(self.path, "rb") as f:
            self._check_size(os.fstat(f.fileno()).st_size)
            return mmap.mmap(f.fileno(), start + length - base, access=mmap.ACCESS_COPY, offset=base), start - base


class TensorLayout:
    """What a stored tensor claims: dtype (export ScalarType), sizes, strides, storage offset, device, grad."""

    __slots__ = ("device", "dtype", "requires_grad", "sizes", "storage_offset", "strides")

    def __init__(
        self,
        dtype: int,
        sizes: list[int],
        strides: list[int],
        storage_offset: int,
        device: m.Device,
        requires_grad: bool = False,
    ) -> None:
        self.dtype, self.sizes, self.strides, self.storage_offset = dtype, sizes, strides, storage_offset
        self.device, self.requires_grad = device, requires_grad


def view_tensor(
    buffer: Buffer,
    start: int,
    length: int,
    layout: TensorLayout,
    where: str,
    device: str | torch.device | None = None,
) -> torch.Tensor:
    """A tensor viewing `length` bytes at `start` of `buffer` as `layout`, after every check; see the module doc."""
    import torch  # deferred: opening an archive maps it without torch (inspect, convert); only a view needs it

    from opwire.serde import tensors  # deferred: imports torch (see the line above)

    dtype = tensors.torch_dtype(layout.dtype, f"{where}.dtype")
    sizes, strides, offset = layout.sizes, layout.strides, layout.storage_offset
    if len(strides) != len(sizes):
        raise DecodeError(f"Expected as many strides as sizes, got {sizes} / {strides} - at `{where}`", where)
    es = dtype.itemsize
    numel = tensors.check_numel(sizes, strides, offset, es, where)
    extent = tensors.storage_extent(sizes, strides, offset)
    if start < 0 or length < 0 or start + length > len(buffer):
        raise DecodeError(
            f"Expected tensor bytes inside the file ({len(buffer)} bytes), got {length} bytes at offset {start} - "
            f"at `{where}`; the file is truncated, corrupt or hostile",
            where,
        )
    if length % es or extent * es > length:
        raise DecodeError(
            f"Expected a storage of at least {extent * es} bytes (a multiple of {es}) for {dtype}{sizes}, "
            f"got {length} - at `{where}`",
            where,
        )
    if numel * es > tensors.MAX_STORAGE_SLACK * length + tensors.SLACK_BYTES:  # as a copying reader refuses
        raise DecodeError(
            f"Expected a view its storage covers, got {dtype}{sizes} with strides {strides}: it materializes "
            f"{numel * es} bytes from a storage of {length} - at `{where}`; refusing to view it",
            where,
        )
    if start % es:
        raise DecodeError(
            f"Expected {dtype} data aligned to {es} bytes, got offset {start} - at `{where}`; the file is corrupt "
            "or hostile (torch and opwire align tensor data to 64 bytes)",
            where,
        )
    target = tensors.check_device(device if device is not None else tensors.device_of(layout.device, where), where)
    if numel == 0:
        out = torch.empty_strided(sizes, strides, dtype=dtype)
    else:
        with warnings.catch_warnings():  # a bytearray or ACCESS_COPY mapping is writable: torch has nothing to say
            warnings.simplefilter("ignore")
            flat = torch.frombuffer(buffer, dtype=dtype, count=length // es, offset=start)
        out = flat.as_strided(sizes, strides, offset)
    return tensors.place(out, target, layout.requires_grad, where)
