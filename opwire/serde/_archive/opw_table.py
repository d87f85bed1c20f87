"""The `.opw` header and tensor table: packed by the writer, checked field by field by the reader.

docs/wire-format.md ("The .opw archive") gives the layout byte by byte. The reader trusts nothing: every
offset, length, index, alias and layout field is checked here before `opw` maps a byte.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from typing import Any

from opwire.errors import DecodeError
from opwire.schema import models as m
from opwire.serde import framing
from opwire.serde._archive.mapping import TensorLayout

__all__ = [
    "ALIGN",
    "HEADER",
    "MAGIC",
    "VERSION",
    "Blob",
    "Header",
    "Table",
    "pack_header",
    "parse_header",
    "parse_table",
]

MAGIC = framing.OPW_MAGIC
VERSION = 1
ALIGN = 64
# magic, version, flags, table offset, table length, data offset, data length, table CRC-32, reserved x2
HEADER = struct.Struct("<8sII QQ QQ IIQ")
_KINDS = ("weights", "constants")
_TENSOR_KEYS = {"blob", "device", "dtype", "grad", "offset", "sizes", "strides"}


@dataclass(frozen=True)
class Header:
    """The fixed 64-byte header."""

    table_offset: int
    table_length: int
    data_offset: int
    data_length: int
    table_crc: int


@dataclass(frozen=True)
class Blob:
    """One aligned run of bytes in the data section (offset relative to the section)."""

    offset: int
    length: int
    crc: int


@dataclass
class Table:
    """The decoded table: the metadata blob, the blobs, and each kind's tensors (aliases resolved)."""

    meta: int
    blobs: list[Blob]
    tensors: dict[str, dict[str, tuple[int, TensorLayout]]]  # kind -> name -> (blob index, layout)
    aliases: dict[str, dict[str, str]]  # kind -> name -> "kind/name" it aliases


def pack_header(h: Header) -> bytes:
    """The 64 header bytes."""
    return HEADER.pack(
        MAGIC, VERSION, 0, h.table_offset, h.table_length, h.data_offset, h.data_length, h.table_crc, 0, 0
    )


def parse_header(raw: bytes, size: int, src: str) -> Header:
    """The header of a file of `size` bytes, every field checked against the file."""
    if len(raw) < HEADER.size:
        raise DecodeError(f"{src}: {len(raw)} bytes, too short for the 64-byte .opw header; the file is truncated")
    magic, version, flags, t_off, t_len, d_off, d_len, crc, r1, r2 = HEADER.unpack_from(raw)
    if magic != MAGIC:
        raise DecodeError(f"{src}: not a .opw archive (magic {magic!r}, expected {MAGIC!r})")
    if version != VERSION:
        raise DecodeError(f"{src}: .opw version {version}; this opwire reads version {VERSION}. Upgrade opwire")
    if flags or r1 or r2:
        raise DecodeError(f"{src}: .opw header flags/reserved fields are not zero; the file is corrupt or newer")
    if t_off != HEADER.size or t_off + t_len > d_off:
        raise DecodeError(
            f"{src}: .opw table at {t_off} ({t_len} bytes) must start at {HEADER.size} and end before the data "
            f"section at {d_off}; the file is corrupt or hostile"
        )
    if d_off % ALIGN:
        raise DecodeError(f"{src}: .opw data section at {d_off}, not aligned to {ALIGN} bytes; corrupt or hostile")
    if d_off + d_len != size:
        raise DecodeError(
            f"{src}: the .opw header says the file is {d_off + d_len} bytes, it is {size}; the file is truncated "
            "or has trailing bytes"
        )
    return Header(t_off, t_len, d_off, d_len, crc)


def _bad(src: str, where: str, why: str) -> DecodeError:
    return DecodeError(f"{src}: .opw table `{where}`: {why}; the file is corrupt or hostile", where)


def _int(v: Any, src: str, where: str, lo: int = 0, hi: int = (1 << 63) - 1) -> int:
    if type(v) is not int or not lo <= v <= hi:
        raise _bad(src, where, f"expected an integer in [{lo}, {hi}], got {str(v)[:40]}")
    return v


def _ints(v: Any, src: str, where: str) -> list[int]:
    if not isinstance(v, list) or len(v) > 64:
        raise _bad(src, where, "expected a list of at most 64 integers")
    return [_int(x, src, f"{where}[{i}]") for i, x in enumerate(v)]


def _blobs(raw: Any, data_length: int, src: str) -> list[Blob]:
    if not isinstance(raw, list):
        raise _bad(src, "blobs", "expected a list of [offset, length, crc32]")
    out: list[Blob] = []
    end = 0
    for i, b in enumerate(raw):
        where = f"blobs[{i}]"
        if not isinstance(b, list) or len(b) != 3:
            raise _bad(src, where, "expected [offset, length, crc32]")
        off, length = _int(b[0], src, where), _int(b[1], src, where)
        crc = _int(b[2], src, where, 0, 0xFFFFFFFF)
        if off % ALIGN:
            raise _bad(src, where, f"offset {off} is not aligned to {ALIGN} bytes")
        if off < end:
            raise _bad(src, where, f"offset {off} overlaps the previous blob (which ends at {end})")
        if off + length > data_length:
            raise _bad(src, where, f"{length} bytes at {off} run past the data section ({data_length} bytes)")
        end = off + length
        out.append(Blob(off, length, crc))
    return out


def _layout(e: dict[str, Any], n_blobs: int, src: str, where: str) -> tuple[int, TensorLayout]:
    if set(e) != _TENSOR_KEYS:
        raise _bad(src, where, f"expected the keys {sorted(_TENSOR_KEYS)}, got {sorted(e)[:8]}")
    blob = _int(e["blob"], src, f"{where}.blob", 0, max(n_blobs - 1, 0))
    if n_blobs == 0:
        raise _bad(src, f"{where}.blob", "names a blob but the table has none")
    dtype = _int(e["dtype"], src, f"{where}.dtype", 0, 1 << 16)
    if not isinstance(e["device"], str) or len(e["device"]) > 64 or not isinstance(e["grad"], bool):
        raise _bad(src, where, "expected a device string and a boolean grad")
    kind, _, index = e["device"].partition(":")
    device = m.Device(type=kind, index=int(index) if index.isdigit() else None)
    layout = TensorLayout(
        dtype,
        _ints(e["sizes"], src, f"{where}.sizes"),
        _ints(e["strides"], src, f"{where}.strides"),
        _int(e["offset"], src, f"{where}.offset"),
        device,
        e["grad"],
    )
    return blob, layout


def parse_table(raw: bytes, data_length: int, src: str, max_elements: int) -> Table:
    """The table JSON, every field checked (blob bounds and alignment, indices, alias targets)."""
    try:
        top = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise DecodeError(f"{src}: the .opw table is not valid JSON ({str(exc)[:80]})") from None
    if not isinstance(top, dict) or set(top) != {"format", "meta", "blobs", "weights", "constants"}:
        raise _bad(src, "$", "expected an object with format, meta, blobs, weights, constants")
    if top["format"] != "opw":
        raise _bad(src, "format", f"expected 'opw', got {str(top['format'])[:20]!r}")
    blobs = _blobs(top["blobs"], data_length, src)
    meta = _int(top["meta"], src, "meta", 0, max(len(blobs) - 1, 0))
    if not blobs:
        raise _bad(src, "meta", "the table has no blob for the program")
    tensors: dict[str, dict[str, tuple[int, TensorLayout]]] = {}
    aliases: dict[str, dict[str, str]] = {}
    count = len(blobs)
    for kind in _KINDS:
        table = top[kind]
        if not isinstance(table, dict):
            raise _bad(src, kind, "expected an object of name -> tensor")
        count += len(table)
        if count > max_elements:
            raise DecodeError(
                f"{src}: the .opw table holds more than max_elements={max_elements} entries; pass a larger "
                "max_elements= if the input is trusted"
            )
        tensors[kind], aliases[kind] = {}, {}
        for name, e in table.items():
            where = f"{kind}[{name[:80]!r}]"
            if isinstance(e, dict) and set(e) == {"alias"} and isinstance(e["alias"], str):
                aliases[kind][name] = e["alias"]
            elif isinstance(e, dict):
                tensors[kind][name] = _layout(e, len(blobs), src, where)
            else:
                raise _bad(src, where, 'expected a tensor object or {"alias": "kind/name"}')
    _check_aliases(tensors, aliases, src)
    return Table(meta, blobs, tensors, aliases)


def _check_aliases(
    tensors: dict[str, dict[str, tuple[int, TensorLayout]]], aliases: dict[str, dict[str, str]], src: str
) -> None:
    """Every alias names a tensor stored in the table (never another alias, so there are no chains or cycles)."""
    for kind, table in aliases.items():
        for name, target in table.items():
            t_kind, _, t_name = target.partition("/")
            where = f"{kind}[{name[:80]!r}].alias"
            if t_kind in aliases and t_name in aliases[t_kind]:
                raise _bad(src, where, f"aliases {target[:80]!r}, itself an alias (chains and cycles are refused)")
            if t_kind not in tensors or t_name not in tensors[t_kind]:
                raise _bad(src, where, f"aliases {target[:80]!r}, which the table does not hold")
