"""A stored tensor's dtype and layout checked without torch: element sizes, numel, storage extent, strides.

What `inspect`, `convert` and `view` need of a tensor they never build: its dtype as torch names it and how many
bytes an element takes (the committed table `torch_serializer_tables.py`, derived from torch and checked against
it), and the layout checks every reader applies before it trusts sizes, strides and offsets. `tensors` builds
torch tensors on top of these.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

from opwire.errors import DecodeError
from opwire.schema import models as m
from opwire.serde.torch_serializer_tables import ITEMSIZES, TORCH_ATTRIBUTES

__all__ = [
    "DTYPES",
    "KNOWN",
    "MAX_STORAGE_SLACK",
    "SLACK_BYTES",
    "Dtype",
    "ElementType",
    "check_layout",
    "check_numel",
    "check_shape",
    "contiguous_strides",
    "dtype_of",
    "storage_extent",
]

# Restoring strides/storage_offset may need a storage larger than the elements; beyond this factor
# (plus 64 MiB) the layout is refused rather than allocated from a hostile offset or stride.
MAX_STORAGE_SLACK = 16
SLACK_BYTES = 64 << 20
_I64_MAX = (1 << 63) - 1


class ElementType(Protocol):
    """What the layout checks read of a dtype: a `Dtype` or a `torch.dtype`."""

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        ...


class Dtype(NamedTuple):
    """A ScalarType as torch knows it, without torch: its name (`float32`) and bytes per element.

    Prints as the torch dtype does (`torch.float32`), so messages read the same whichever of the two a check got.
    """

    name: str
    itemsize: int

    def __str__(self) -> str:
        return f"torch.{self.name}"


DTYPES: dict[int, Dtype] = {
    int(m.ScalarType[member]): Dtype(attr, ITEMSIZES[attr])
    for member, attr in TORCH_ATTRIBUTES["ScalarType"].items()
    if member in m.ScalarType.__members__
}
"""Serialized ScalarType value -> its dtype (FLOAT, 7 -> float32, 4 bytes); 0/Unknown and unmapped ones are absent."""

KNOWN = ", ".join(m.ScalarType(v).name for v in DTYPES)
"""The ScalarTypes torch can hold, for messages."""


def dtype_of(st: int, where: str = "dtype") -> Dtype:
    """The dtype of an export-schema ScalarType value; DecodeError when torch has none."""
    dtype = DTYPES.get(st)
    if dtype is None:
        name = m.ScalarType(st).name if st in m.ScalarType._value2member_map_ else str(st)
        raise DecodeError(
            f"Expected a ScalarType torch can hold ({KNOWN}), got {name} - at `{where}`; "
            f"the file may come from a newer schema or be corrupt",
            where,
        )
    return dtype


def storage_extent(sizes: list[int], strides: list[int], storage_offset: int) -> int:
    """Elements a storage needs to hold a tensor of this layout (0 for an empty tensor)."""
    if any(s == 0 for s in sizes):
        return 0
    return storage_offset + sum((n - 1) * s for n, s in zip(sizes, strides)) + 1


def check_numel(sizes: list[int], strides: list[int], offset: int, itemsize: int, where: str) -> int:
    """numel of a layout, after checking every size, stride, the offset, numel and byte count fit torch's i64."""
    bad = [x for x in (*sizes, *strides, offset) if x < 0]
    if bad:
        raise DecodeError(
            f"Expected non-negative sizes, strides and storage_offset, got {bad[0]} - at `{where}`", where
        )
    numel = 1
    for n in sizes:
        numel *= n
    extent = storage_extent(sizes, strides, offset)
    if max((*sizes, *strides, offset, numel * itemsize, extent * itemsize), default=0) > _I64_MAX:
        raise DecodeError(
            f"Expected sizes whose numel and byte span fit in 64 bits, got sizes {sizes} strides {strides} "
            f"({numel} elements) - at `{where}`; the file is corrupt or hostile",
            where,
        )
    return numel


def check_shape(tv: m.TensorValue, dtype: ElementType, where: str = "tensor") -> int:
    """Validate a payload's sizes, strides, offset and layout (counts, signs, i64 fit, strided); return numel.

    The part of the checks every payload shares, whether its bytes come inline (`check_layout`) or from a
    streamed trace's payload frame (`recording.payloads.check_span`)."""
    sizes, strides, offset = list(tv.sizes), list(tv.strides), tv.storage_offset
    if len(strides) != len(sizes):
        raise DecodeError(
            f"Expected as many strides as sizes ({len(sizes)}), got {len(strides)} - at `{where}.strides`",
            f"{where}.strides",
        )
    numel = check_numel(sizes, strides, offset, dtype.itemsize, where)
    if tv.layout is not None and tv.layout != m.Layout.Strided:
        raise DecodeError(f"Expected a strided tensor, got layout {m.Layout(tv.layout).name} - at `{where}`", where)
    return numel


def check_layout(tv: m.TensorValue, dtype: ElementType, where: str = "tensor") -> int:
    """Validate sizes/strides/offset/data length; return the storage extent in elements."""
    sizes, strides, offset = list(tv.sizes), list(tv.strides), tv.storage_offset
    numel = check_shape(tv, dtype, where)
    nbytes = numel * dtype.itemsize
    if len(tv.data) != nbytes:
        if not tv.data and tv.digest is not None and numel:
            raise DecodeError(
                f"Expected element bytes, got only a digest (recorded with outputs='digest') - at `{where}.data`; "
                f"a digest-only tensor cannot be rebuilt",
                f"{where}.data",
            )
        raise DecodeError(
            f"Expected {nbytes} bytes of data ({numel} elements of {dtype}), got {len(tv.data)} - at `{where}.data`",
            f"{where}.data",
        )
    extent = storage_extent(sizes, strides, offset)
    if extent * dtype.itemsize > MAX_STORAGE_SLACK * nbytes + SLACK_BYTES:
        raise DecodeError(
            f"Expected strides/storage_offset that fit the data, got a layout needing a storage of "
            f"{extent * dtype.itemsize} bytes for {nbytes} bytes of elements - at `{where}`; refusing to allocate it",
            where,
        )
    return extent


def contiguous_strides(sizes: list[int]) -> list[int]:
    """Row-major strides (in elements) of a tensor of these sizes."""
    strides, acc = [], 1
    for n in reversed(sizes):
        strides.append(acc)
        acc *= max(n, 1)
    return strides[::-1]
