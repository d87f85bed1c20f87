"""Read one weight or constant of a torch .pt2 archive into a TensorValue, never unpickling by default.

torch stores a raw entry as the bytes of the whole storage and the tensor's sizes/strides/offset in
its PayloadMeta; pickled entries (tensor subclasses, custom objects, the legacy layout) go through
`torch.load` only when the caller passed `allow_pickle=True`.
"""

from __future__ import annotations

import io
from typing import Any

from opwire.errors import DecodeError
from opwire.schema import models as m
from opwire.serde import tensor_layout
from opwire.serde._archive.mapping import TensorLayout

__all__ = ["payload_layout", "pickle_refused", "raw_tensor_value", "unpickle"]


def pickle_refused(archive: str, entry: str, what: str) -> DecodeError:
    """The error for a pickled entry read without allow_pickle."""
    return DecodeError(
        f"{archive}: {what} is stored pickled in `{entry}`; opwire does not unpickle (pickle can run code). "
        f"Pass allow_pickle=True (CLI: --allow-pickle) only for an archive you trust",
        entry,
    )


def unpickle(data: bytes, archive: str, entry: str) -> Any:
    """torch.load an entry the caller allowed, the way torch.export.load does (weights_only first)."""
    import torch

    try:
        return torch.load(io.BytesIO(data), weights_only=True)
    except Exception:
        try:
            return torch.load(io.BytesIO(data), weights_only=False)
        except Exception as exc:
            raise DecodeError(f"{archive}: cannot load pickled entry `{entry}`: {exc}", entry) from None


def _as_ints(values: list[m.SymInt], where: str) -> list[int]:
    out = []
    for i, v in enumerate(values):
        if v.as_int is None:
            raise DecodeError(f"Expected a concrete size (as_int), got {v.type} - at `{where}[{i}]`", f"{where}[{i}]")
        out.append(v.as_int)
    return out


def payload_layout(meta: m.PayloadMeta, where: str) -> TensorLayout:
    """The layout a raw payload's tensor_meta claims (concrete ints, strided, not on the meta device)."""
    tm = meta.tensor_meta
    if tm is None:
        raise DecodeError(f"Expected tensor_meta for a raw (unpickled) payload, got none - at `{where}`", where)
    if tm.layout not in (m.Layout.Strided, None):
        raise DecodeError(f"Expected a strided tensor, got layout {m.Layout(tm.layout).name} - at `{where}`", where)
    if tm.device.type == "meta":
        raise DecodeError(
            f"device 'meta' holds no data, but the archive stores an entry for it - at `{where}`; "
            "the archive is corrupt or hostile",
            where,
        )
    return TensorLayout(
        int(tm.dtype),
        _as_ints(tm.sizes, f"{where}.tensor_meta.sizes"),
        _as_ints(tm.strides, f"{where}.tensor_meta.strides"),
        _as_ints([tm.storage_offset], f"{where}.tensor_meta.storage_offset")[0],
        tm.device,
        bool(tm.requires_grad),
    )


def raw_tensor_value(meta: m.PayloadMeta, storage: bytes, where: str) -> m.TensorValue:
    """The TensorValue of a raw payload: `storage` holds the whole storage the tensor views."""
    tm = meta.tensor_meta
    if tm is None:
        raise DecodeError(f"Expected tensor_meta for a raw (unpickled) payload, got none - at `{where}`", where)
    dtype = tensor_layout.dtype_of(tm.dtype, f"{where}.tensor_meta.dtype")
    sizes = _as_ints(tm.sizes, f"{where}.tensor_meta.sizes")
    strides = _as_ints(tm.strides, f"{where}.tensor_meta.strides")
    offset = _as_ints([tm.storage_offset], f"{where}.tensor_meta.storage_offset")[0]
    if len(strides) != len(sizes):
        raise DecodeError(f"Expected as many strides as sizes, got {sizes} / {strides} - at `{where}`", where)
    if tm.layout not in (m.Layout.Strided, None):
        raise DecodeError(f"Expected a strided tensor, got layout {m.Layout(tm.layout).name} - at `{where}`", where)
    if tm.device.type == "meta":
        raise DecodeError(
            f"device 'meta' holds no data, but the entry stores {len(storage)} bytes for it - at `{where}`; "
            "the archive is corrupt or hostile",
            where,
        )
    es = dtype.itemsize
    numel = tensor_layout.check_numel(sizes, strides, offset, es, where)
    extent = tensor_layout.storage_extent(sizes, strides, offset)
    if len(storage) % es or extent * es > len(storage):
        raise DecodeError(
            f"Expected a storage of at least {extent * es} bytes (a multiple of {es}) for {dtype}{sizes}, "
            f"got {len(storage)} - at `{where}`",
            where,
        )
    if numel and not storage:
        raise DecodeError(f"Expected element bytes, got an empty entry (a fake tensor?) - at `{where}`", where)
    # Zero or overlapping strides make a view read storage bytes many times; opwire materializes the view,
    # so the elements may exceed the storage only within the slack that restoring a layout allows too.
    if numel * es > tensor_layout.MAX_STORAGE_SLACK * len(storage) + tensor_layout.SLACK_BYTES:
        raise DecodeError(
            f"Expected a view its storage covers, got {dtype}{sizes} with strides {strides}: it materializes "
            f"{numel * es} bytes from a storage of {len(storage)} - at `{where}`; refusing to allocate it",
            where,
        )
    data = _gather(storage, dtype, sizes, strides, offset, numel)
    return m.TensorValue(
        dtype=m.ScalarType(tm.dtype),
        sizes=sizes,
        strides=strides,
        storage_offset=offset,
        device=tm.device,
        requires_grad=tm.requires_grad,
        data=data,
    )


def _gather(
    storage: bytes, dtype: tensor_layout.Dtype, sizes: list[int], strides: list[int], offset: int, numel: int
) -> bytes:
    """Row-major element bytes of the view (sizes, strides, offset) into `storage`."""
    es = dtype.itemsize
    if numel == 0:
        return b""
    if strides == tensor_layout.contiguous_strides(sizes):
        return storage[offset * es : (offset + numel) * es]
    import ctypes

    import torch  # deferred: torch gathers a strided view; contiguous ones (what torch saves) need no torch

    u8 = torch.frombuffer(bytearray(storage), dtype=torch.uint8)
    picked = u8.as_strided((*sizes, es), (*(s * es for s in strides), 1), offset * es).contiguous()
    return ctypes.string_at(picked.data_ptr(), picked.numel())
