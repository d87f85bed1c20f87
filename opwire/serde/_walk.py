"""Check a model tree against the IDL and name the first value no codec could write.

Models validate on construction and assignment; this walk catches what slipped past
(`model_construct`, in-place list edits) so encoders can report a path instead of crashing.
"""

from __future__ import annotations

import math
from enum import IntEnum
from typing import Any

from opwire.schema.idl import TypeRef
from opwire.schema.models import SCHEMA

__all__ = ["find_invalid"]

_INT_BITS = {"i8": 8, "i16": 16, "i32": 32, "i64": 64}
Path = tuple[str | int, ...]


def find_invalid(obj: Any) -> tuple[Path, str] | None:
    """(path, problem) of the first value in `obj` that does not fit the IDL, or None."""
    return _check(obj, TypeRef("struct", type(obj).__name__), ())


def _check(value: Any, t: TypeRef, path: Path) -> tuple[Path, str] | None:
    kind = t.kind
    if kind in _INT_BITS:
        bits = _INT_BITS[kind]
        if type(value) is not int and not (isinstance(value, IntEnum)):
            return path, f"Expected `{kind}`, got {type(value).__name__}"
        if not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
            return path, f"Expected `{kind}`, got {value}, which is out of range"
        return None
    if kind == "bool":
        return None if type(value) is bool else (path, f"Expected `bool`, got {type(value).__name__}")
    if kind == "double":
        ok = isinstance(value, float) or (type(value) is int and math.isfinite(float(value)))
        return None if ok else (path, f"Expected `double`, got {type(value).__name__}")
    if kind == "string":
        return None if isinstance(value, str) else (path, f"Expected `string`, got {type(value).__name__}")
    if kind == "binary":
        ok = isinstance(value, bytes | bytearray)
        return None if ok else (path, f"Expected `binary`, got {type(value).__name__}")
    if kind == "enum":
        values = {v for _, v in SCHEMA.enums[str(t.name)].values}
        if type(value) is bool or not isinstance(value, int) or int(value) not in values:
            return path, f"Expected enum {t.name}, got {value!r}"
        return None
    if kind in ("list", "set"):
        if not isinstance(value, list):
            return path, f"Expected `{t.spelled()}`, got {type(value).__name__}"
        for i, item in enumerate(value):
            found = _check(item, t.args[0], (*path, i))
            if found:
                return found
        return None
    if kind == "map":
        if not isinstance(value, dict):
            return path, f"Expected `{t.spelled()}`, got {type(value).__name__}"
        for k, item in value.items():
            found = _check(k, t.args[0], (*path, str(k))) or _check(item, t.args[1], (*path, str(k)))
            if found:
                return found
        return None
    return _check_struct(value, str(t.name), path)


def _check_struct(value: Any, name: str, path: Path) -> tuple[Path, str] | None:
    sdef = SCHEMA.structs[name]
    if type(value).__name__ != name or not hasattr(value, "__dict__"):
        return path, f"Expected {sdef.kind} {name}, got {type(value).__name__}"
    d = value.__dict__
    if sdef.kind == "union":
        members = [f for f in sdef.fields if d.get(f.name) is not None]
        if len(members) != 1:
            got = ", ".join(f.name for f in members) or "none"
            return path, f"union {name} needs exactly one member set, got {len(members)} ({got})"
        f = members[0]
        return _check(d[f.name], f.type, (*path, f.name))
    for f in sdef.fields:
        v = d.get(f.name)
        if v is None:
            if f.optional:
                continue
            return (*path, f.name), f"required field `{f.name}` of struct {name} is not set"
        found = _check(v, f.type, (*path, f.name))
        if found:
            return found
    return None
