"""The pure-Python Thrift encoder, driven by the IDL: writes what Apache Thrift's C codec writes (fields in
id order, None fields left out), at nesting depths the C codec refuses (up to Python's recursion limit)."""

from __future__ import annotations

import sys
from functools import cache
from typing import Any

from opwire.schema.idl import FieldDef, TypeRef
from opwire.schema.models import SCHEMA
from opwire.serde._thrift.binary import BinaryWriter
from opwire.serde._thrift.compact import CompactWriter
from opwire.serde._thrift.decode import Located
from opwire.serde._thrift.spec import TTYPE

__all__ = ["encode_payload"]

Writer = BinaryWriter | CompactWriter


@cache
def _fields_by_id(name: str) -> tuple[FieldDef, ...]:
    return tuple(sorted(SCHEMA.structs[name].fields, key=lambda f: f.id))


def _value(w: Writer, t: TypeRef, v: Any) -> None:
    kind = t.kind
    if kind == "struct":
        _struct(w, str(t.name), v)
    elif kind == "string":
        w.bytes_(v.encode("utf-8"))
    elif kind == "binary":
        w.bytes_(bytes(v))
    elif kind == "i64":
        w.i64(v)
    elif kind in ("i32", "enum"):
        w.i32(int(v))
    elif kind == "double":
        w.double(v)
    elif kind == "bool":
        w.bool(v)
    elif kind == "i16":
        w.i16(v)
    elif kind == "i8":
        w.i8(v)
    elif kind in ("list", "set"):
        et = t.args[0]
        w.list_begin(TTYPE[et.kind], len(v))
        for x in v:
            _value(w, et, x)
    else:
        kt, vt = t.args
        w.map_begin(TTYPE[kt.kind], TTYPE[vt.kind], len(v))
        for k, x in v.items():
            _value(w, kt, k)
            _value(w, vt, x)


def _struct(w: Writer, name: str, obj: Any) -> None:
    d = obj.__dict__
    fields = _fields_by_id(name)
    if SCHEMA.structs[name].kind == "union":
        set_members = [f for f in fields if d.get(f.name) is not None]
        if len(set_members) != 1:
            got = ", ".join(f.name for f in set_members) or "none"
            raise Located(f"union {name} needs exactly one member set, got {len(set_members)} ({got})", ())
    w.struct_begin()
    for f in fields:
        v = d.get(f.name)
        if v is None:
            continue
        if w.field(TTYPE[f.type.kind], f.id, v):
            _value(w, f.type, v)
    w.struct_end()


def encode_payload(obj: Any, codec: str) -> bytes:
    """The Thrift `codec` encoding of model `obj` (no header); exceptions mean an unwritable value."""
    w: Writer = BinaryWriter() if codec == "binary" else CompactWriter()
    try:
        _struct(w, type(obj).__name__, obj)
    except RecursionError:  # the process-wide limit is the caller's to set, never changed here
        raise Located(
            f"the model nests deeper than this Python stack allows (sys.getrecursionlimit() is "
            f"{sys.getrecursionlimit()}); raise the limit yourself to write a model this deep",
            (),
        ) from None
    return bytes(w.out)
