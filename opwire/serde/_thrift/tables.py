"""Where each tensor's bytes sit in an encoded `OpwireArchive`: one walk over the Thrift value, nothing built.

`scan` notes, for every entry of the `weights` and `constants` maps, the file positions of its `data` field
(length prefix, payload, length) and of its `padding` field when it has one (length prefix, length); it steps
over everything else within the decoder's depth and element bounds. The mapped reader
(serde/thrift_archive.py) views payloads at those positions, and the writer (serde/_padding.py) widens each
padding so that the payload after it starts at an aligned file offset.

What is stepped over (the program, above all: ~2,000 nodes take the checking decoder's walk four times as long as
the C reader's decode) goes to the C module's `thrift_skip` where it is built (`_cbuild_src/thrift_skip.c`), and
each tensor to its `thrift_tensor`: they step over exactly what the checking decoder's `skip` (and `_scan_tensor`)
would, charging the same values and noting the same positions, or decline, and then the Python walk reads the value
and words any error. So the positions and the errors are the same with or without the C module (`native=False`
walks in Python alone).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from opwire.errors import DecodeError, printable
from opwire.serde._thrift.binary import BinaryReader, WireError
from opwire.serde._thrift.compact import CompactReader
from opwire.serde._thrift.decode import Located, _Decoder
from opwire.serde._thrift.spec import LIST, MAP, SET, STRING, STRUCT
from opwire.serde._thrift.stack import run_frames

_c_skip: Any
_c_tensor: Any
try:
    from opwire.serde import _cbuild

    # a module built before these existed answers as none (the tests insist on them: test_thrift_scan.py)
    _c_skip, _c_tensor = getattr(_cbuild, "thrift_skip", None), getattr(_cbuild, "thrift_tensor", None)
except ImportError:  # not built (a source checkout without `pip install -e .`): the checking decoder's walk serves
    _c_skip = _c_tensor = None

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
Skipper = Callable[[Any, _Decoder, int, int], None]  # steps over one nested value (`_walk` or `_skip`)
_BOUND = 2**62  # depths and budgets past it are the same as none to the C module (a value takes a byte at least)


def scan(
    buffer: Any, start: int, codec: str, src: str, max_elements: int, max_depth: int, *, native: bool = True
) -> dict[str, dict[str, Entry]]:
    """Each table's entries by tensor name, from the `OpwireArchive` at `buffer[start:]` (to its end); a
    DecodeError naming the table on malformed input, trailing bytes or a repeated map, name or data field.
    `native=False`: step over nested values in Python even where the C module is built (the same answer)."""
    r: Any = BinaryReader(buffer, start) if codec == "binary" else CompactReader(buffer, start)
    dec = _Decoder(r, max_depth, "", max_elements)
    native = native and _c_skip is not None and _c_tensor is not None
    skip = _skip if native else _walk
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
                _scan_table(r, dec, found[table], table, skip, native)
                where = "OpwireArchive"
            elif wire in _NESTED:
                skip(r, dec, wire, 1)
            else:
                dec.skip_leaf(wire, ())
        r.struct_end()
    except (WireError, Located) as exc:
        message = exc.message if isinstance(exc, Located) else str(exc)
        raise DecodeError(f"{src}: {message} - in `{where}` of the OpwireArchive", where) from None
    if r.pos != r.end:
        raise DecodeError(f"{src}: {r.end - r.pos} trailing bytes after the OpwireArchive (offset {r.pos})")
    return found


def _walk(r: Any, dec: _Decoder, wire: int, depth: int) -> None:
    """Step over one struct, list, set or map entered at `depth`: the checking decoder's walk."""
    run_frames(dec.skip(wire, (), depth))


def _skip(r: Any, dec: _Decoder, wire: int, depth: int) -> None:
    """`_walk` by the C module: the same bytes read and values charged; where it declines, `_walk` decides."""
    bound = min(dec.max_depth, _BOUND)
    done = _c_skip(r.data, r.pos, r.name == "compact", wire, depth, bound, min(dec.elements, _BOUND))
    if done is None:
        _walk(r, dec, wire, depth)
    else:
        r.pos, values = done
        dec.elements -= values  # within the budget: the C module declines past it


def _tensor(r: Any, dec: _Decoder) -> Entry | None:
    """`_scan_tensor` by the C module (the same positions, bytes read and values charged), or None where it declines
    (then `_scan_tensor` decides)."""
    bound = min(dec.max_depth, _BOUND)
    done = _c_tensor(r.data, r.pos, r.name == "compact", bound, min(dec.elements, _BOUND))
    if done is None:
        return None
    r.pos, values, *spans = done
    dec.elements -= values
    return Entry(*spans)


def _scan_table(r: Any, dec: _Decoder, found: dict[str, Entry], table: str, skip: Skipper, native: bool) -> None:
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
        entry = _tensor(r, dec) if native else None
        found[name] = entry or _scan_tensor(r, dec, f"{table}[{printable(name)!r}]", skip)


def _scan_tensor(r: Any, dec: _Decoder, where: str, skip: Skipper) -> Entry:
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
            skip(r, dec, wire, 2)
        else:
            dec.skip_leaf(wire, ())
    r.struct_end()
    data, pad = fields.get(_DATA), fields.get(_PADDING)
    entry = Entry(*data) if data is not None else NO_DATA
    return entry if pad is None else entry._replace(pad=pad[0], pad_length=pad[2])
