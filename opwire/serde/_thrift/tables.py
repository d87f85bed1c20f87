"""Where each tensor's bytes sit in an encoded `OpwireArchive`: one walk over the Thrift value, nothing built.

`scan` notes, for every entry of the `weights` and `constants` maps, the file positions of its `data` field
(length prefix, payload, length) and of its `padding` field when it has one (length prefix, length); it steps
over everything else within the decoder's depth and element bounds. The mapped reader
(serde/thrift_archive.py) views payloads at those positions, and the writer (serde/_padding.py) widens each
padding so that the payload after it starts at an aligned file offset.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from opwire.errors import DecodeError, printable
from opwire.serde._thrift.binary import BinaryReader, WireError
from opwire.serde._thrift.compact import CompactReader
from opwire.serde._thrift.decode import Located, _Decoder
from opwire.serde._thrift.spec import LIST, MAP, SET, STRING, STRUCT
from opwire.serde._thrift.stack import run_frames

__all__ = ["TABLES", "Entry", "scan"]

TABLES = {20: "weights", 30: "constants"}  # OpwireArchive's field ids of the two tensor maps
_PADDING = 65  # TensorValue.padding
_DATA = 70  # TensorValue.data
_NESTED = frozenset({STRUCT, LIST, SET, MAP})


class Entry(NamedTuple):
    """Positions of one tensor's fields in the bytes scanned (all -1/0 when it has no data field)."""

    prefix: int  # where the data's length prefix starts
    data: int  # where its bytes start
    length: int  # how many there are
    pad: int = -1  # where the padding's length prefix starts (-1: no padding field)
    pad_length: int = 0


NO_DATA = Entry(-1, 0, 0)


def scan(
    buffer: Any, start: int, codec: str, src: str, max_elements: int, max_depth: int
) -> dict[str, dict[str, Entry]]:
    """Each table's entries by tensor name, from the `OpwireArchive` at `buffer[start:]` (to its end); a
    DecodeError naming the table on malformed input, trailing bytes or a repeated map, name or data field."""
    r: Any = BinaryReader(buffer, start) if codec == "binary" else CompactReader(buffer, start)
    dec = _Decoder(r, max_depth, "", max_elements)
    found: dict[str, dict[str, Entry]] = {"weights": {}, "constants": {}}
    seen: set[str] = set()
    where = "OpwireArchive"
    try:
        r.struct_begin()
        while True:
            wire, fid = r.field_begin()
            if wire == 0:
                break
            table = TABLES.get(fid)
            if table is not None and wire == MAP:
                where = table
                if table in seen:
                    raise Located(f"a second {table} map", ())
                seen.add(table)
                _scan_table(r, dec, found[table], table)
                where = "OpwireArchive"
            elif wire in _NESTED:
                run_frames(dec.skip(wire, (), 1))
            else:
                dec.skip_leaf(wire, ())
        r.struct_end()
    except (WireError, Located) as exc:
        message = exc.message if isinstance(exc, Located) else str(exc)
        raise DecodeError(f"{src}: {message} - in `{where}` of the OpwireArchive", where) from None
    if r.pos != r.end:
        raise DecodeError(f"{src}: {r.end - r.pos} trailing bytes after the OpwireArchive (offset {r.pos})")
    return found


def _scan_table(r: Any, dec: _Decoder, found: dict[str, Entry], table: str) -> None:
    """One `map<string, TensorValue>`: each entry's data and padding positions, everything else skipped."""
    kt, vt, n = r.map_begin()
    if n and (kt != STRING or vt != STRUCT):
        raise Located(f"expected map<string, TensorValue>, got key/value wire types {kt}/{vt}", ())
    for _ in range(n):
        raw = r.read_bytes()
        try:
            name = bytes(raw).decode("utf-8")
        except UnicodeDecodeError:
            raise Located(f"a tensor name that is not UTF-8: {printable(repr(bytes(raw[:40])))}", ()) from None
        if name in found:
            raise Located(f"the name {printable(name)!r} twice", ())
        dec.spend(1, ())
        found[name] = _scan_tensor(r, dec, f"{table}[{printable(name)!r}]")


def _scan_tensor(r: Any, dec: _Decoder, where: str) -> Entry:
    """One TensorValue: where its data (and padding) fields are; a field given twice is refused."""
    r.struct_begin()
    fields: dict[int, tuple[int, int, int]] = {}  # field id -> (length prefix, bytes, length)
    while True:
        wire, fid = r.field_begin()
        if wire == 0:
            break
        if fid in (_DATA, _PADDING) and wire == STRING:
            if fid in fields:
                raise Located(f"{where} has two {'data' if fid == _DATA else 'padding'} fields", ())
            prefix = r.pos
            fields[fid] = (prefix, *r.read_span())
        elif wire in _NESTED:
            run_frames(dec.skip(wire, (), 2))
        else:
            dec.skip_leaf(wire, ())
    r.struct_end()
    data, pad = fields.get(_DATA), fields.get(_PADDING)
    entry = Entry(*data) if data is not None else NO_DATA
    return entry if pad is None else entry._replace(pad=pad[0], pad_length=pad[2])
