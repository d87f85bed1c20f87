"""Write a `.opw` archive: header, tensor table, then 64-byte aligned blobs, identical storages stored once.

Tensors come from an OpwireArchive (payload bytes) or from an opened archive (`pt2.open`, `opw.open`:
mapped tensors, so converting a multi-GB .pt2 holds no copy of its weights). Each tensor is stored as the
bytes of the storage it views (as torch's .pt2 stores it), so sizes, strides and storage offset survive.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from opwire.errors import DecodeError, EncodeError
from opwire.schema import models as m
from opwire.serde import tensors
from opwire.serde._archive import opw_table, pt2_write
from opwire.serde.tensor_tables import ProgramTables

__all__ = ["write"]

Buffer = bytes | memoryview


def _storage_view(t: torch.Tensor) -> memoryview:
    """The bytes of the storage `t` views, without a copy (little-endian hosts; CPU tensors)."""
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    storage = t.untyped_storage()
    n = storage.nbytes()
    if n == 0:
        return memoryview(b"")
    return memoryview((ctypes.c_ubyte * n).from_address(storage.data_ptr())).cast("B")


def _from_value(tv: m.TensorValue, where: str) -> tuple[dict[str, Any], Buffer]:
    try:
        tensors.check_layout(tv, tensors.torch_dtype(tv.dtype, f"{where}.dtype"), where)
    except DecodeError as exc:
        raise EncodeError(f"cannot write {where}: {exc}", where) from None
    data = pt2_write.storage_bytes(tv, where)
    return _entry(int(tv.dtype), tv.sizes, tv.strides, tv.storage_offset, tv.device, tv.requires_grad), data


def _from_tensor(t: torch.Tensor, where: str) -> tuple[dict[str, Any], Buffer]:
    if t.layout != torch.strided or t.device.type == "meta":
        raise EncodeError(f"cannot write {where}: a strided tensor with data is needed, got {t.layout}/{t.device}")
    st = tensors.scalar_type_of(t.dtype, where)
    device = m.Device(type=t.device.type, index=t.device.index)
    return _entry(
        int(st), list(t.shape), list(t.stride()), int(t.storage_offset()), device, t.requires_grad
    ), _storage_view(t)


def _entry(
    dtype: int, sizes: list[int], strides: list[int], offset: int, device: m.Device, grad: bool | None
) -> dict[str, Any]:
    dev = device.type if device.index is None else f"{device.type}:{device.index}"
    return {
        "blob": 0,
        "device": dev,
        "dtype": dtype,
        "grad": bool(grad),
        "offset": int(offset),
        "sizes": [int(n) for n in sizes],
        "strides": [int(n) for n in strides],
    }


def _tensors_of(source: m.OpwireArchive | ProgramTables) -> Iterator[tuple[str, str, dict[str, Any], Buffer, int]]:
    """(kind, name, table entry, storage bytes, identity) of every tensor of an OpwireArchive or an opened archive.

    Tensors with one identity shared their storage in the source (the same payload object, the same storage)."""
    if isinstance(source, m.OpwireArchive):
        for kind, table in (("weights", source.weights), ("constants", source.constants)):
            for name, tv in table.items():
                yield (kind, name, *_from_value(tv, f"{kind}[{name!r}]"), id(tv))
        return
    weights, constants = source.tensors("cpu")
    for kind, opened in (("weights", weights), ("constants", constants)):
        for name, t in opened.items():
            yield (kind, name, *_from_tensor(t, f"{kind}[{name!r}]"), t.untyped_storage().data_ptr())


def _pad(n: int) -> int:
    return -n % opw_table.ALIGN


def write(source: m.OpwireArchive | ProgramTables, path: str | Path, meta: bytes) -> int:
    """Write `source`'s tensors and the encoded `meta` blob (program, example inputs) to `path`; returns its size."""
    blobs: list[Buffer] = [meta]
    digests: dict[bytes, int] = {}
    seen: dict[tuple[int, str], str] = {}  # (identity, entry JSON) -> "kind/name" of the first tensor stored so
    table: dict[str, Any] = {"format": "opw", "meta": 0, "blobs": [], "weights": {}, "constants": {}}
    for kind, name, entry, data, identity in _tensors_of(source):
        digest = hashlib.sha256(data).digest()
        index = digests.get(digest)
        if index is None:
            index = digests[digest] = len(blobs)
            blobs.append(data)
        entry["blob"] = index
        key = (identity if len(data) else -1, json.dumps(entry, sort_keys=True))
        if key in seen:
            table[kind][name] = {"alias": seen[key]}
        else:
            seen[key] = f"{kind}/{name}"
            table[kind][name] = entry
    offset = 0
    for b in blobs:
        offset += _pad(offset)
        table["blobs"].append([offset, len(b), zlib.crc32(b)])
        offset += len(b)
    raw = json.dumps(table, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()
    data_offset = opw_table.HEADER.size + len(raw) + _pad(opw_table.HEADER.size + len(raw))
    header = opw_table.pack_header(
        opw_table.Header(opw_table.HEADER.size, len(raw), data_offset, offset, zlib.crc32(raw))
    )
    target = Path(path)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    created = False
    try:
        # a fresh file of our own (never through a planted symlink), renamed over the target at the end
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
        created = True
        with os.fdopen(fd, "wb") as f:
            f.write(header + raw + b"\0" * (data_offset - opw_table.HEADER.size - len(raw)))
            pos = 0
            for b in blobs:
                f.write(b"\0" * _pad(pos))
                pos += _pad(pos)
                f.write(b)
                pos += len(b)
        os.replace(tmp, target)
        created = False
    finally:
        if created:
            tmp.unlink()
    return data_offset + offset
