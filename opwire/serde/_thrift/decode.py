"""The checking Thrift decoder, pure Python and driven by the IDL: exact errors with paths.

It reads one value of a named root type and enforces every rule of the wire format: wire types match the
IDL, lengths fit the bytes that remain, nesting stays within `max_depth`, strings are valid UTF-8, enum
values and union members are known, exactly one union member is set, required fields are present,
unknown fields are skipped (within the same bounds) and no byte is left over.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError

from opwire.schema.idl import TypeRef
from opwire.serde._thrift.binary import BinaryReader, WireError
from opwire.serde._thrift.compact import CompactReader
from opwire.serde._thrift.spec import (
    BOOL,
    BYTE,
    DOUBLE,
    I16,
    I32,
    I64,
    LIST,
    MAP,
    SET,
    STRING,
    STRUCT,
    TTYPE,
    TTYPE_NAMES,
    UUID,
    enum_class,
    plan,
)
from opwire.serde._thrift.stack import Frames, run_frames

__all__ = ["Located", "budget_message", "count_payload", "decode_payload"]

Loc = tuple[Any, ...]
"""Where a value is, linked: `()` at the root, else `(parent's Loc, key)` - one pair a level, so a value nested
N deep costs O(1) to locate, not an N-long path copied at each level (O(N^2) over a deep input); `Located`
spells it out as the flat path, only when there is an error."""
Reader = BinaryReader | CompactReader
_CONTAINERS = frozenset({"struct", "list", "set", "map"})
_NESTED = frozenset({STRUCT, LIST, SET, MAP})  # wire types of containers


class Located(Exception):
    """A wire problem and the path where it happened (turned into a DecodeError by the caller)."""

    def __init__(self, message: str, loc: Loc) -> None:
        super().__init__(message)
        self.message = message
        self.loc = spelled(loc)


def spelled(loc: Loc) -> tuple[str | int, ...]:
    """The flat path (keys from the root down) of a linked `Loc`."""
    keys = []
    while loc:
        loc, key = loc
        keys.append(key)
    return tuple(reversed(keys))


def _linked(loc: Loc, keys: Any) -> Loc:
    """`loc` extended by each of `keys` in turn."""
    for key in keys:
        loc = (loc, key)
    return loc


class _Decoder:
    def __init__(self, reader: Reader, max_depth: int, newer: str, max_elements: int) -> None:
        self.r = reader
        self.max_depth = max_depth
        self.newer = newer  # how to name a newer writer in messages
        self.max_elements = max_elements
        self.elements = max_elements  # values still allowed

    def spend(self, n: int, loc: Loc) -> None:
        """Charge `n` values (leaves) against the budget."""
        self.elements -= n
        if self.elements < 0:
            raise Located(budget_message(self.max_elements), loc)

    def enter(self, depth: int, loc: Loc) -> int:
        depth += 1
        if depth > self.max_depth:
            raise Located(
                f"nesting deeper than max_depth={self.max_depth}; pass a larger max_depth if the input is trusted",
                loc,
            )
        self.spend(1, loc)
        return depth

    def value(self, t: TypeRef, wire: int, loc: Loc, depth: int) -> Any:
        """One value of IDL type `t` sent with wire type `wire`: a leaf read now, or the reader of a container."""
        expected = TTYPE[t.kind]
        if wire != expected and not (t.kind == "list" and wire == SET):
            raise Located(
                f"Expected `{t.spelled()}` (wire type {TTYPE_NAMES[expected]}), got wire type "
                f"{TTYPE_NAMES.get(wire, wire)}",
                loc,
            )
        kind = t.kind
        if kind == "struct":
            return self.struct(str(t.name), loc, depth)
        if kind in ("list", "set"):
            return self.list_(t.args[0], loc, depth)
        if kind == "map":
            return self.map_(t.args[0], t.args[1], loc, depth)
        return self.leaf(t, loc)

    def leaf(self, t: TypeRef, loc: Loc) -> Any:
        """Read one scalar of IDL type `t` (its wire type already checked)."""
        r = self.r
        kind = t.kind
        if kind == "string":
            raw = r.read_bytes()
            try:
                return raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise Located(f"invalid UTF-8 in a string ({exc.reason} at byte {exc.start})", loc) from None
        if kind == "binary":
            return bytes(r.read_bytes())
        if kind == "i64":
            return r.read_i64()
        if kind == "double":
            return r.read_double()
        if kind == "bool":
            return r.read_bool()
        if kind == "enum":
            return self.enum(str(t.name), r.read_i32(), loc)
        if kind == "i32":
            return r.read_i32()
        if kind == "i16":
            return r.read_i16()
        return r.read_i8()

    def enum(self, name: str, v: int, loc: Loc) -> Any:
        cls = enum_class(name)
        try:
            return cls(v)
        except ValueError:
            known = ", ".join(str(int(e)) for e in cls)
            raise Located(
                f"unknown value {v} of enum {name} (known: {known}); {self.newer} may have written it, "
                f"or the file is corrupt",
                loc,
            ) from None

    def list_(self, et: TypeRef, loc: Loc, depth: int) -> Frames:
        depth = self.enter(depth, loc)
        wire, n = self.r.list_begin()
        if n and wire != TTYPE[et.kind]:
            raise Located(f"Expected list elements of `{et.spelled()}`, got wire type {TTYPE_NAMES.get(wire)}", loc)
        if et.kind not in _CONTAINERS:
            self.spend(n, loc)  # every leaf charged before one is read
            return [self.value(et, wire, (loc, i), depth) for i in range(n)]
        out = []
        for i in range(n):
            out.append((yield self.value(et, wire, (loc, i), depth)))
        return out

    def map_(self, kt: TypeRef, vt: TypeRef, loc: Loc, depth: int) -> Frames:
        depth = self.enter(depth, loc)
        kw, vw, n = self.r.map_begin()
        if n and (kw != TTYPE[kt.kind] or vw != TTYPE[vt.kind]):
            got = f"{TTYPE_NAMES.get(kw)}, {TTYPE_NAMES.get(vw)}"
            raise Located(f"Expected map entries of `{kt.spelled()}, {vt.spelled()}`, got wire types {got}", loc)
        nested = vt.kind in _CONTAINERS
        if not nested:
            self.spend(n, loc)
        out: dict[Any, Any] = {}
        for _ in range(n):
            k = self.value(kt, kw, loc, depth)
            v = self.value(vt, vw, (loc, str(k)), depth)
            out[k] = (yield v) if nested else v
        return out

    def struct(self, name: str, loc: Loc, depth: int) -> Frames:
        """Read struct or union `name` and build its model."""
        depth = self.enter(depth, loc)
        p = plan(name)
        r = self.r
        r.struct_begin()
        kwargs: dict[str, Any] = {}
        while True:
            try:
                wire, fid = r.field_begin()
            except WireError as exc:
                raise Located(str(exc), loc) from None
            if wire == 0:
                break
            f = p.fields.get(fid)
            if f is None:
                if p.is_union:
                    raise Located(
                        f"unknown member id {fid} of union {name}: {self.newer} wrote it; known members: "
                        + ", ".join(f"{x.name} ({x.id})" for x in p.fields.values()),
                        loc,
                    )
                try:
                    if wire in _NESTED:
                        yield self.skip(wire, (loc, f"<field {fid}>"), depth)
                    else:
                        self.skip_leaf(wire, (loc, f"<field {fid}>"))
                except WireError as exc:
                    raise Located(str(exc), (loc, f"<field {fid}>")) from None
                continue
            floc = (loc, f.name)
            if f.name in kwargs:
                raise Located(f"field `{f.name}` (id {fid}) of {name} appears twice", floc)
            try:
                if f.type.kind in _CONTAINERS:
                    kwargs[f.name] = yield self.value(f.type, wire, floc, depth)
                else:
                    self.spend(1, floc)
                    kwargs[f.name] = self.value(f.type, wire, floc, depth)
            except WireError as exc:
                raise Located(str(exc), floc) from None
        r.struct_end()
        return self.build(p, kwargs, loc)

    def build(self, p: Any, kwargs: dict[str, Any], loc: Loc) -> BaseModel:
        if p.is_union and len(kwargs) != 1:
            got = ", ".join(kwargs) or "none"
            members = ", ".join(f.name for f in p.fields.values())
            raise Located(
                f"union {p.name} needs exactly one member set, got {len(kwargs)} ({got}); members: {members}", loc
            )
        missing = [n for n in p.required if n not in kwargs]
        if missing:
            order = [f.name for f in p.fields.values()]
            first = min(missing, key=order.index)
            raise Located(f"missing required field `{first}` of struct {p.name}", (loc, first))
        try:
            return p.model(**kwargs)  # type: ignore[no-any-return]
        except ValidationError as exc:  # values the wire cannot rule out (e.g. a range the IDL narrows)
            err = exc.errors(include_url=False)[0]
            raise Located(str(err["msg"]), _linked(loc, err["loc"])) from None

    def skip(self, wire: int, loc: Loc, depth: int) -> Frames:
        """Skip a struct, list or map this schema does not know, within the same length, depth and element bounds."""
        r = self.r
        depth = self.enter(depth, loc)
        if wire == STRUCT:
            r.struct_begin()
            while True:
                w, _ = r.field_begin()
                if w == 0:
                    break
                if w in _NESTED:
                    yield self.skip(w, loc, depth)
                else:
                    self.skip_leaf(w, loc)
            r.struct_end()
        elif wire == MAP:
            kt, vt, n = r.map_begin()
            for _ in range(n):
                if kt in _NESTED:
                    yield self.skip(kt, loc, depth)
                else:
                    self.skip_leaf(kt, loc, key=True)
                if vt in _NESTED:
                    yield self.skip(vt, loc, depth)
                else:
                    self.skip_leaf(vt, loc)
        else:
            et, n = r.list_begin()
            if et not in _NESTED:
                self.spend(n, loc)
                for _ in range(n):
                    self.skip_leaf(et, loc, key=True)  # already charged
            else:
                for _ in range(n):
                    yield self.skip(et, loc, depth)

    def skip_leaf(self, wire: int, loc: Loc, key: bool = False) -> None:
        """Skip one scalar of wire type `wire`, charged as a value unless it is a map key (or charged already)."""
        r = self.r
        if wire == BOOL:
            r.read_bool()
        elif wire == BYTE:
            r.read_i8()
        elif wire == I16:
            r.read_i16()
        elif wire == I32:
            r.read_i32()
        elif wire == I64:
            r.read_i64()
        elif wire == DOUBLE:
            r.read_double()
        elif wire == STRING:
            r.read_bytes()
        elif wire == UUID:
            r.skip_fixed(16)
        else:
            raise Located(f"invalid wire type code {wire}", loc)
        if not key:
            self.spend(1, loc)


def budget_message(max_elements: int) -> str:
    """The message for a value holding more than `max_elements` values."""
    return (
        f"more than {max_elements} values (structs, unions, lists, maps and the strings, numbers and bools in "
        f"them) exceeds the budget max_elements={max_elements}; pass a larger max_elements= (CLI: --max-elements) "
        "if the input is trusted"
    )


def count_payload(data: bytes, start: int, codec: str, max_depth: int, limit: int) -> int | None:
    """Values one struct in `data[start:]` holds, building nothing: `limit + 1` as soon as the count passes
    `limit`; None when the bytes are malformed (the decoder reports that)."""
    reader: Reader = BinaryReader(data, start) if codec == "binary" else CompactReader(data, start)
    dec = _Decoder(reader, max_depth, "", limit)
    try:
        run_frames(dec.skip(STRUCT, (), 0))
    except Located:
        return limit + 1 if dec.elements < 0 else None
    except WireError:
        return None
    return limit - dec.elements


def decode_payload(
    data: bytes, start: int, root: str, codec: str, max_depth: int, newer: str, max_elements: int
) -> BaseModel:
    """Decode exactly one `root` value from `data[start:]`; Located on any problem.

    Iterative (an explicit stack of container readers), so any nesting `max_depth` allows decodes whatever
    the interpreter's recursion limit, which is never touched.
    """
    reader: Reader = BinaryReader(data, start) if codec == "binary" else CompactReader(data, start)
    dec = _Decoder(reader, max_depth, newer, max_elements)
    loc: Loc = ()
    try:
        obj: BaseModel = run_frames(dec.struct(root, loc, 0))
    except WireError as exc:
        raise Located(str(exc), loc) from None
    if reader.pos != reader.end:
        raise Located(
            f"{reader.end - reader.pos} trailing bytes after the {root} value (offset {reader.pos} of {reader.end}); "
            f"the data holds something else than one {root}, or is corrupt",
            loc,
        )
    return obj
