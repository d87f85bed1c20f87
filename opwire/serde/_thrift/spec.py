"""What the Thrift codecs derive from the IDL: wire types, Apache Thrift `thrift_spec` tuples, model builders.

Everything here is computed once from `opwire.schema.models.SCHEMA`; no codec spells a type by hand.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from functools import cache
from typing import Any

from opwire.schema import models
from opwire.schema.idl import FieldDef, TypeRef
from opwire.schema.models import MODELS, SCHEMA

__all__ = [
    "FAST_STRUCT_DEPTH",
    "TTYPE",
    "TTYPE_NAMES",
    "StructPlan",
    "container_depth_bound",
    "enum_class",
    "plan",
    "ttype_of",
]

# Thrift's TType numbers (the binary protocol writes them; compact maps them to its own codes).
STOP, BOOL, BYTE, DOUBLE, I16, I32, I64, STRING, STRUCT, MAP, SET, LIST, UUID = (
    0,
    2,
    3,
    4,
    6,
    8,
    10,
    11,
    12,
    13,
    14,
    15,
    16,
)
TTYPE = {
    "bool": BOOL,
    "i8": BYTE,
    "i16": I16,
    "i32": I32,
    "i64": I64,
    "double": DOUBLE,
    "string": STRING,
    "binary": STRING,
    "enum": I32,
    "struct": STRUCT,
    "map": MAP,
    "set": SET,
    "list": LIST,
}
TTYPE_NAMES = {
    BOOL: "bool",
    BYTE: "i8",
    DOUBLE: "double",
    I16: "i16",
    I32: "i32",
    I64: "i64",
    STRING: "string/binary",
    STRUCT: "struct",
    MAP: "map",
    SET: "set",
    LIST: "list",
    UUID: "uuid",
}

FAST_STRUCT_DEPTH = 64
"""Struct nesting that Apache Thrift's C codec (fastbinary) accepts before it raises; deeper values take the
pure-Python path."""


def ttype_of(t: TypeRef) -> int:
    """The wire type of an IDL type."""
    return TTYPE[t.kind]


@dataclass(frozen=True)
class StructPlan:
    """How to read and build one struct or union (all derived from the IDL)."""

    name: str
    is_union: bool
    model: Any
    fields: dict[int, FieldDef]
    required: frozenset[str]
    enums: tuple[tuple[str, type[IntEnum]], ...]


@cache
def plan(name: str) -> StructPlan:
    """The StructPlan of struct or union `name`."""
    sdef = SCHEMA.structs[name]
    model = MODELS[name]
    required = frozenset(f.name for f in sdef.fields if model.model_fields[f.name].is_required())
    enums = tuple((f.name, enum_class(str(f.type.name))) for f in sdef.fields if f.type.kind == "enum")
    return StructPlan(name, sdef.kind == "union", model, {f.id: f for f in sdef.fields}, required, enums)


def enum_class(name: str) -> type[IntEnum]:
    """The generated IntEnum class of IDL enum `name`."""
    cls: type[IntEnum] = getattr(models, name)
    return cls


def _containers_within(t: TypeRef, structs_left: int, memo: dict[tuple[str, int], int]) -> int:
    """Longest chain of nested containers a value of type `t` can hold using at most `structs_left` structs."""
    if t.kind == "struct":
        if structs_left <= 0:
            return -(10**9)
        key = (str(t.name), structs_left)
        if key not in memo:
            memo[key] = 0  # recursion guard; real value below
            best = 0
            for f in SCHEMA.structs[str(t.name)].fields:
                best = max(best, _containers_within(f.type, structs_left - 1, memo))
            memo[key] = 1 + best
        return memo[key]
    if t.kind in ("list", "set", "map"):
        return 1 + max(0, max(_containers_within(a, structs_left, memo) for a in t.args))
    return 0


@cache
def container_depth_bound() -> int:
    """Deepest container nesting (structs, lists, maps) fastbinary can return within FAST_STRUCT_DEPTH structs."""
    memo: dict[tuple[str, int], int] = {}
    return max(_containers_within(TypeRef("struct", n), FAST_STRUCT_DEPTH, memo) for n in SCHEMA.structs)


# ------------------------------------------------------------------------------ Apache Thrift specs


def _typeargs(t: TypeRef, holders: dict[str, list[Any]]) -> Any:
    """The `thrift_spec` type arguments of `t` (fastbinary's encoding of the IDL type)."""
    if t.kind == "string":
        return "UTF8"
    if t.kind == "binary":
        return "BINARY"
    if t.kind in ("list", "set"):
        e = t.args[0]
        return (TTYPE[e.kind], _typeargs(e, holders), False)
    if t.kind == "map":
        k, v = t.args
        return (TTYPE[k.kind], _typeargs(k, holders), TTYPE[v.kind], _typeargs(v, holders), False)
    if t.kind == "struct":
        return holders[str(t.name)]
    return None


def build_specs(klass_for: Callable[[str], Any]) -> dict[str, list[Any]]:
    """`[klass, thrift_spec]` per struct, as fastbinary takes them (recursive types share the lists)."""
    holders: dict[str, list[Any]] = {name: [None, None] for name in SCHEMA.structs}
    for name, sdef in SCHEMA.structs.items():
        spec: list[Any] = [None] * (max(f.id for f in sdef.fields) + 1)
        for f in sdef.fields:
            spec[f.id] = (f.id, TTYPE[f.type.kind], f.name, _typeargs(f.type, holders), None)
        holders[name][0] = klass_for(name)
        holders[name][1] = tuple(spec)
    return holders
