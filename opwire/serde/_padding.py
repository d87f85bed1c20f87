"""`TensorValue.padding` (records 1.7): the zero bytes that align an archive's payloads in a Thrift file.

A Thrift writer puts each byte string right after its length prefix, wherever the value before it ended, so
the payloads of an `OpwireArchive` written as one Thrift blob start at arbitrary file offsets, and a mapped
reader can view only those that happen to be aligned for their dtype. opwire's writer therefore gives every
tensor of the archive's `weights` and `constants` a `padding` field (id 65, written between `requires_grad`
(60) and `data` (70): fields go in id order) whose length makes `data`'s first byte land on a multiple of
`ALIGN` in the file.

Solving the length prefixes: the archive is first encoded with an empty padding on each table tensor, then
one scan (`_thrift.tables`) finds every padding's length prefix and the payload after it. Widening padding
number i by p_i bytes moves payload i, and everything after it, by p_i. So, walking in file order with the
shift s so far, p_i = -(base + data_i + s) mod ALIGN, and p_i < ALIGN = 64 keeps the prefix the same size it
was for zero: one varint byte in compact (up to 127), four bytes in binary. Only the prefix byte(s) are
rewritten; nothing else moves but by the shift, and no field header changes (the padding's is there already).

Why 64: every dtype's element size divides it (complex128's 16 included), it is a cache line and the widest
SIMD load, and it is what torch's .pt2 (zip records aligned at 64) and opwire's .opw use, so a payload viewed
in place is as aligned as one loaded by torch. It costs at most 63 bytes per tensor.

Readers drop the field: a decoded archive equals the one written, and a padding longer than `ALIGN - 1`,
holding a non-zero byte, or anywhere but a tensor of an archive's tables is a DecodeError (EncodeError for a
model given to a writer). Apache Thrift, thriftpy2 and opwire before 1.7 skip it as an unknown field.
"""

from __future__ import annotations

import struct
import sys
from functools import cache
from typing import Any

from opwire.errors import DecodeError, EncodeError
from opwire.schema import models as m
from opwire.serde._paths import format_path
from opwire.serde._thrift import tables

__all__ = ["ALIGN", "SETTLED", "aligned", "check_written", "placeholders", "settle"]

ALIGN = 64
SETTLED = {"TensorValue": "padding"}
"""Struct -> the field `settle` checks and drops after a decoder built the model (an archive's alignment, refused
elsewhere); `_thrift.fast.decode_plain`, which builds no model, declines a value holding one."""
_TABLES = ("weights", "constants")
_PREFIX = {"binary": 4, "compact": 1}  # size of a length prefix below 128


def placeholders(archive: m.OpwireArchive) -> m.OpwireArchive:
    """`archive` with an empty padding on each tensor of its tables (to be widened by `aligned`); an EncodeError
    when a padding is set anywhere else."""
    _refuse(archive, EncodeError, "cannot encode ")
    return archive.model_copy(
        update={
            t: {n: tv.model_copy(update={"padding": b""}) for n, tv in getattr(archive, t).items()} for t in _TABLES
        }
    )


def check_written(obj: Any) -> None:
    """An EncodeError when model `obj` (not an archive) holds a TensorValue with a padding."""
    _refuse(obj, EncodeError, "cannot encode ")


def aligned(payload: bytes, codec: str, base: int) -> list[bytes | memoryview]:
    """The pieces of `payload` (an archive from `placeholders`, encoded, to be written at file offset `base`) with
    each padding widened so that every payload after one starts at a multiple of ALIGN in the file."""
    found = tables.scan(payload, 0, codec, "the archive written", sys.maxsize, sys.maxsize)
    pads = sorted((e.pad, e.data) for entries in found.values() for e in entries.values() if e.pad >= 0)
    view, at, shift = memoryview(payload), 0, 0
    pieces: list[bytes | memoryview] = []
    for pad, data in pads:
        p = -(base + data + shift) % ALIGN
        prefix = struct.pack(">i", p) if codec == "binary" else bytes((p,))
        pieces += [view[at:pad], prefix, bytes(p)]
        at, shift = pad + _PREFIX[codec], shift + p
    pieces.append(view[at:])
    return pieces


def settle(obj: Any, source: str) -> Any:
    """A decoded model with the paddings of an archive's tables checked and dropped; a DecodeError for a padding
    anywhere else, longer than ALIGN - 1 bytes, or not all zeros."""
    _refuse(obj, DecodeError, f"{source}: " if source else "")
    if type(obj) is not m.OpwireArchive:
        return obj
    where = f"{source}: " if source else ""
    update = {}
    for t in _TABLES:
        table = getattr(obj, t)
        if any(tv.padding is not None for tv in table.values()):
            update[t] = {n: _dropped(tv, format_path((t, n, "padding")), where) for n, tv in table.items()}
    return obj.model_copy(update=update) if update else obj


def _dropped(tv: m.TensorValue, path: str, where: str) -> m.TensorValue:
    pad = tv.padding
    if pad is None:
        return tv
    if len(pad) >= ALIGN or pad.count(0) != len(pad):
        what = f"{len(pad)} bytes" if len(pad) >= ALIGN else "a non-zero byte"
        raise DecodeError(
            f"{where}OpwireArchive: a padding of at most {ALIGN - 1} zero bytes was expected, got {what} - at "
            f"`{path}`; the file is corrupt or was not written by opwire",
            path,
        )
    fields = tv.model_fields_set - {"padding"}
    return m.TensorValue.model_construct(fields, **{**tv.__dict__, "padding": None})


def _refuse(obj: Any, error: type[DecodeError] | type[EncodeError], prefix: str) -> None:
    """Raise `error` (its message starting with `prefix` and the type's name) at the first TensorValue with a
    padding outside an archive's tables."""
    loc = _misplaced(obj)
    if loc is not None:
        path = format_path(loc)
        raise error(
            f"{prefix}{type(obj).__name__}: a padding is allowed only on the tensors of an OpwireArchive's weights "
            f"and constants (opwire's Thrift writer sets it there to align them) - at `{path}`",
            path,
        )


def _misplaced(obj: Any) -> tuple[str | int, ...] | None:
    """The path of a padding in `obj` outside an archive's tables, or None. Only the fields that can hold a
    TensorValue are walked (without recursion), so a program costs one lookup and a trace frame a few."""
    holders = _holders()
    fields = holders.get(type(obj).__name__)
    if fields is None:
        return None
    if type(obj) is m.OpwireArchive:
        fields = tuple(f for f in fields if f not in _TABLES)
    # each path linked, `(parent's, key)` from `()`: one pair a level, spelled out only for a padding found (a
    # flat path copied at each level cost O(N^2) over a value nested N deep)
    stack: list[tuple[Any, tuple[Any, ...]]] = (
        [(obj, ())]
        if type(obj) is m.TensorValue
        else [(v, ((), f)) for f in fields if (v := getattr(obj, f)) is not None]
    )
    while stack:
        v, loc = stack.pop()
        if type(v) is m.TensorValue:
            if v.padding is not None:
                keys: list[str | int] = ["padding"]
                while loc:
                    loc, key = loc
                    keys.append(key)
                return tuple(reversed(keys))
        elif isinstance(v, list):
            stack += [(x, (loc, i)) for i, x in enumerate(v)]
        elif isinstance(v, dict):
            stack += [(x, (loc, str(k))) for k, x in v.items()]
        else:
            stack += [(x, (loc, f)) for f in holders[type(v).__name__] if (x := getattr(v, f)) is not None]
    return None


@cache
def _holders() -> dict[str, tuple[str, ...]]:
    """Struct name -> its fields whose type can hold a TensorValue, for each struct that can hold one.

    Each field's struct names are gathered once (a fixed point over them, not over the types again): the first
    decode calls this after its models exist, and its allocations then trigger young collections that walk all of
    them, so it must be cheap (it took ~100 ms, and the collections it set off another ~80 ms, when it re-walked
    every type on each round)."""
    structs = m.SCHEMA.structs

    refs = {n: [(f.name, f.type.structs_named()) for f in s.fields] for n, s in structs.items()}
    holding = {"TensorValue"}
    while True:
        more = {n for n, fields in refs.items() if n not in holding and any(names & holding for _, names in fields)}
        if not more:
            break
        holding |= more
    return {n: tuple(f for f, names in refs[n] if names & holding) for n in sorted(holding)}


_holders()  # now, at import: not after a decode's first models are built (see above)
