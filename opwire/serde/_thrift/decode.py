"""The checking Thrift decoder, pure Python and driven by the IDL: exact errors with paths.

It reads one value of a named root type and enforces every rule of the wire format: wire types match the
IDL, lengths fit the bytes that remain, nesting stays within `max_depth`, strings are valid UTF-8, enum
values and union members are known, exactly one union member is set, required fields are present,
unknown fields are skipped (within the same bounds) and no byte is left over.
"""

from __future__ import annotations

import sys
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
    plan,
)

__all__ = ["Located", "budget_message", "count_payload", "decode_payload"]

Loc = tuple[str | int, ...]
Reader = BinaryReader | CompactReader


class Located(Exception):
    """A wire problem and the path where it happened (turned into a DecodeError by the caller)."""

    def __init__(self, message: str, loc: Loc) -> None:
        super().__init__(message)
        self.message = message
        self.loc = loc


class _Decoder:
    def __init__(self, reader: Reader, max_depth: int, newer: str, max_elements: int) -> None:
        self.r = reader
        self.max_depth = max_depth
        self.newer = newer  # how to name a newer writer in messages
        self.max_elements = max_elements
        self.elements = max_elements  # containers still allowed

    def enter(self, depth: int, loc: Loc) -> int:
        depth += 1
        if depth > self.max_depth:
            raise Located(
                f"nesting deeper than max_depth={self.max_depth}; pass a larger max_depth if the input is trusted",
                loc,
            )
        self.elements -= 1
        if self.elements < 0:
            raise Located(budget_message(self.max_elements), loc)
        return depth

    def value(self, t: TypeRef, wire: int, loc: Loc, depth: int) -> Any:
        """Read one value of IDL type `t` sent with wire type `wire`."""
        expected = TTYPE[t.kind]
        if wire != expected and not (t.kind == "list" and wire == SET):
            raise Located(
                f"Expected `{t.spelled()}` (wire type {TTYPE_NAMES[expected]}), got wire type "
                f"{TTYPE_NAMES.get(wire, wire)}",
                loc,
            )
        r = self.r
        kind = t.kind
        if kind == "struct":
            return self.struct(str(t.name), loc, depth)
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
        if kind == "i8":
            return r.read_i8()
        if kind in ("list", "set"):
            return self.list_(t.args[0], loc, depth)
        return self.map_(t.args[0], t.args[1], loc, depth)

    def enum(self, name: str, v: int, loc: Loc) -> Any:
        from opwire.serde._thrift.spec import _enum_class

        cls = _enum_class(name)
        try:
            return cls(v)
        except ValueError:
            known = ", ".join(str(int(e)) for e in cls)
            raise Located(
                f"unknown value {v} of enum {name} (known: {known}); {self.newer} may have written it, "
                f"or the file is corrupt",
                loc,
            ) from None

    def list_(self, et: TypeRef, loc: Loc, depth: int) -> list[Any]:
        depth = self.enter(depth, loc)
        wire, n = self.r.list_begin()
        if n and wire != TTYPE[et.kind]:
            raise Located(f"Expected list elements of `{et.spelled()}`, got wire type {TTYPE_NAMES.get(wire)}", loc)
        return [self.value(et, wire, (*loc, i), depth) for i in range(n)]

    def map_(self, kt: TypeRef, vt: TypeRef, loc: Loc, depth: int) -> dict[Any, Any]:
        depth = self.enter(depth, loc)
        kw, vw, n = self.r.map_begin()
        if n and (kw != TTYPE[kt.kind] or vw != TTYPE[vt.kind]):
            got = f"{TTYPE_NAMES.get(kw)}, {TTYPE_NAMES.get(vw)}"
            raise Located(f"Expected map entries of `{kt.spelled()}, {vt.spelled()}`, got wire types {got}", loc)
        out: dict[Any, Any] = {}
        for _ in range(n):
            k = self.value(kt, kw, loc, depth)
            out[k] = self.value(vt, vw, (*loc, str(k)), depth)
        return out

    def struct(self, name: str, loc: Loc, depth: int) -> BaseModel:
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
                    self.skip(wire, (*loc, f"<field {fid}>"), depth)
                except WireError as exc:
                    raise Located(str(exc), (*loc, f"<field {fid}>")) from None
                continue
            floc = (*loc, f.name)
            if f.name in kwargs:
                raise Located(f"field `{f.name}` (id {fid}) of {name} appears twice", floc)
            try:
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
            raise Located(f"missing required field `{first}` of struct {p.name}", (*loc, first))
        try:
            return p.model(**kwargs)  # type: ignore[no-any-return]
        except ValidationError as exc:  # values the wire cannot rule out (e.g. a range the IDL narrows)
            err = exc.errors(include_url=False)[0]
            raise Located(str(err["msg"]), (*loc, *err["loc"])) from None

    def skip(self, wire: int, loc: Loc, depth: int) -> None:
        """Skip a value of a field this schema does not know, within the same length and depth bounds."""
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
        elif wire == STRUCT:
            depth = self.enter(depth, loc)
            r.struct_begin()
            while True:
                w, _ = r.field_begin()
                if w == 0:
                    break
                self.skip(w, loc, depth)
            r.struct_end()
        elif wire in (LIST, SET):
            depth = self.enter(depth, loc)
            et, n = r.list_begin()
            for _ in range(n):
                self.skip(et, loc, depth)
        elif wire == MAP:
            depth = self.enter(depth, loc)
            kt, vt, n = r.map_begin()
            for _ in range(n):
                self.skip(kt, loc, depth)
                self.skip(vt, loc, depth)
        else:
            raise Located(f"invalid wire type code {wire}", loc)


def budget_message(max_elements: int) -> str:
    """The message for a value holding more than `max_elements` containers."""
    return (
        f"more than {max_elements} containers (structs, unions, lists, maps) exceeds the budget "
        f"max_elements={max_elements}; pass a larger max_elements= (CLI: --max-elements) if the input is trusted"
    )


def count_payload(data: bytes, start: int, codec: str, max_depth: int, max_elements: int) -> str | None:
    """Walk one struct in `data[start:]` building nothing: the budget message if it holds more than
    `max_elements` containers, else None (also when the bytes are malformed: the decoder reports that)."""
    reader: Reader = BinaryReader(data, start) if codec == "binary" else CompactReader(data, start)
    dec = _Decoder(reader, max_depth, "", max_elements)
    try:
        dec.skip(STRUCT, (), 0)
    except Located as exc:
        return exc.message if dec.elements < 0 else None
    except (WireError, RecursionError):
        return None
    return None


def decode_payload(
    data: bytes, start: int, root: str, codec: str, max_depth: int, newer: str, max_elements: int
) -> BaseModel:
    """Decode exactly one `root` value from `data[start:]`; Located on any problem.

    Recursive, and it never touches the process-wide recursion limit (other threads rely on it): nesting
    that `max_depth` allows but the interpreter's limit does not is refused with a message saying so.
    """
    reader: Reader = BinaryReader(data, start) if codec == "binary" else CompactReader(data, start)
    dec = _Decoder(reader, max_depth, newer, max_elements)
    loc: Loc = ()
    try:
        obj = dec.struct(root, loc, 0)
    except WireError as exc:
        raise Located(str(exc), loc) from None
    except RecursionError:
        raise Located(
            f"nesting deeper than this Python stack allows (sys.getrecursionlimit() is {sys.getrecursionlimit()}, "
            f"max_depth={max_depth}); opwire does not change the process-wide limit: raise it yourself for "
            "trusted input this deep",
            loc,
        ) from None
    if reader.pos != reader.end:
        raise Located(
            f"{reader.end - reader.pos} trailing bytes after the {root} value (offset {reader.pos} of {reader.end}); "
            f"the data holds something else than one {root}, or is corrupt",
            loc,
        )
    return obj
