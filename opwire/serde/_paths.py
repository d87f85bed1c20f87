"""Paths into models (`graph_module.graph.nodes[3].inputs[1].arg`) and the IDL types found there.

Every codec reports where a value went wrong with these helpers, and pydantic's validation errors
are translated here into opwire's DecodeError messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from opwire.errors import DecodeError
from opwire.schema.idl import TypeRef
from opwire.schema.models import SCHEMA, SCHEMA_VERSION

__all__ = ["decode_error_from_validation", "format_path", "json_type_name", "type_at"]


def format_path(loc: Sequence[str | int]) -> str:
    """Render a location tuple as `a.b[3].c` (`$` for the root)."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "$"


def type_at(root: str, loc: Sequence[str | int]) -> TypeRef | None:
    """The IDL type at `loc` below struct `root`, or None if the path leaves the schema."""
    t: TypeRef | None = TypeRef("struct", root)
    for part in loc:
        if t is None:
            return None
        if t.kind in ("list", "set") and isinstance(part, int):
            t = t.args[0]
        elif t.kind == "map":
            t = t.args[1]
        elif t.kind == "struct" and isinstance(part, str):
            sdef = SCHEMA.structs.get(str(t.name))
            f = next((f for f in sdef.fields if f.name == part), None) if sdef else None
            t = f.type if f else None
        else:
            return None
    return t


_JSON_NAMES = {str: "string", bool: "boolean", int: "integer", float: "number", dict: "object", list: "array"}


def json_type_name(value: Any) -> str:
    """What a decoded JSON value is, in JSON's words (`string`, `object`, ...)."""
    if value is None:
        return "null"
    return _JSON_NAMES.get(type(value), type(value).__name__)


def _expected(t: TypeRef | None) -> str:
    if t is None:
        return "a value"
    if t.kind == "enum":
        return f"enum {t.name}"
    if t.kind == "struct":
        kind = SCHEMA.structs[str(t.name)].kind
        return f"{kind} {t.name}"
    return f"`{t.spelled()}`"


def _message(err: Any, root: str) -> str:
    """One pydantic error as an opwire sentence (without the path)."""
    kind = err["type"]
    loc = tuple(err["loc"])
    got = err.get("input")
    if kind == "extra_forbidden":
        parent = type_at(root, loc[:-1])
        union = parent.name if parent is not None else "?"
        known = ", ".join(f.name for f in SCHEMA.structs[str(union)].fields) if union in SCHEMA.structs else ""
        return (
            f"unknown member `{loc[-1]}` of union {union}: the file was written by a newer schema than this "
            f"opwire reads ({SCHEMA_VERSION[0]}.{SCHEMA_VERSION[1]}); known members: {known}"
        )
    if kind == "missing":
        parent = type_at(root, loc[:-1])
        return f"missing required field `{loc[-1]}` of {_expected(parent)}"
    t = type_at(root, loc)
    if kind == "enum":
        assert t is not None and t.kind == "enum"
        valid = ", ".join(str(v) for _, v in SCHEMA.enums[str(t.name)].values)
        return (
            f"unknown value {got!r} of enum {t.name} (known: {valid}); a newer schema may have written it, "
            f"or the file is corrupt"
        )
    if kind in ("less_than_equal", "greater_than_equal"):
        return f"Expected {_expected(t)}, got {got!r}, which is out of range"
    if kind == "value_error":
        return str(err["msg"]).removeprefix("Value error, ")
    if kind == "json_invalid":
        return f"invalid JSON: {err.get('ctx', {}).get('error', err['msg'])}"
    return f"Expected {_expected(t)}, got {json_type_name(got)} {_short(got)}".rstrip()


def _short(value: Any) -> str:
    if isinstance(value, dict | list):
        return ""
    text = repr(value)
    return f"`{text[:60]}`" if len(text) <= 60 else f"`{text[:57]}...`"


def decode_error_from_validation(exc: ValidationError, root: str, source: str = "") -> DecodeError:
    """Translate pydantic's ValidationError into a DecodeError naming the first failure and its path."""
    errors = exc.errors(include_url=False)
    err = errors[0]
    loc = tuple(err["loc"])
    path = format_path(loc)
    more = f" (and {len(errors) - 1} more error{'s' if len(errors) > 2 else ''})" if len(errors) > 1 else ""
    where = f"{source}: " if source else ""
    msg = f"{where}{_message(err, root)} - at `{path}` in {root}{more}"
    return DecodeError(msg, path)
