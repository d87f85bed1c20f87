"""The plan table of the C model builder (`opwire.serde._cbuild`, sources in `_cbuild_src/`), compiled from the IDL.

The same facts `_build.py` compiles into Python builders, as tuples the C module reads once: per IDL type its kind
(and item types, struct index, enum members); per struct or union its model class, fields in IDL order (name,
type, required, whether JSON null is taken, the default as pydantic fills it in, Thrift id, whether leaving it
out of the wire is canonical), every field name, for unions the all-None template and the members by name, and
for `thrift_plain` the `_plain` class of `_thrift/fast.py`, whether the struct is declined (an expression) and the
index of its settled field (serde/_padding.py) or -1.
The SymExpr `expr_str` check and base64 go back to `_build`'s Python functions (opwire's grammar decides).

`json_write` walks the same plan the other way (models -> torch's JSON bytes, `_cbuild_src/json_write.c`);
`thrift_check` holds an encode's Thrift bytes to the IDL's rules without building anything (`thrift_check.c`).
`json_build`, `thrift_build`, `thrift_plain` and `json_write` return None when the C module is not built (then
`_build`'s Python builders, fastbinary for `thrift_plain`, or `_json_write`'s Python writers serve) or when it does
not take the input: the checking (or reference) path decides and words the error, as with the builders.
"""

from __future__ import annotations

from functools import cache
from types import ModuleType
from typing import Any

from pydantic import BaseModel

from opwire.schema.idl import TypeRef
from opwire.schema.models import MODELS, SCHEMA
from opwire.serde._build import EXPRESSIONS, NONFINITE, binary, enum_values, expr, field_default
from opwire.serde._padding import SETTLED
from opwire.serde._thrift.fast import plain_classes

_cbuild: ModuleType | None
try:
    from opwire.serde import _cbuild as _built_module

    _cbuild = _built_module
except ImportError:  # not built (a source checkout without `pip install -e .`): the Python builders serve
    _cbuild = None

__all__ = ["AVAILABLE", "TooMany", "json_build", "json_write", "thrift_build", "thrift_check", "thrift_plain"]

AVAILABLE = _cbuild is not None
"""Whether the C model builder is built and loaded."""

_KINDS = {"bool": 1, "i8": 2, "i16": 3, "i32": 4, "i64": 5, "double": 6, "string": 7, "binary": 8, "enum": 9}
_STRUCT, _LIST, _MAP, _EXPR = 10, 11, 12, 13
_DEFAULTS = {"shared": 0, "factory": 1, "copy": 2}


class _Unbuilt(Exception):
    """Stands in for TooMany where the C module is not built (never raised)."""


TooMany: type[Exception] = _cbuild.TooMany if _cbuild is not None else _Unbuilt
"""A Thrift decode read more values than its budget (the C module's exception)."""


class _Tables:
    """Writes the type and struct tables (types deduplicated; structs in `SCHEMA` order)."""

    def __init__(self) -> None:
        self.structs = {name: i for i, name in enumerate(SCHEMA.structs)}
        self.types: list[tuple[int, int, int, Any]] = []
        self.index: dict[Any, int] = {}

    def type(self, t: TypeRef, checked: bool = False) -> int:
        """Index of the type node of `t` (`checked`: a string that goes through opwire's expression grammar)."""
        key = ("expr",) if checked else t
        if key in self.index:
            return self.index[key]
        k = t.kind
        if checked:
            node: tuple[int, int, int, Any] = (_EXPR, 0, 0, None)
        elif k in _KINDS:
            node = (_KINDS[k], 0, 0, enum_values(str(t.name)) if k == "enum" else None)
        elif k == "struct":
            node = (_STRUCT, self.structs[str(t.name)], 0, None)
        elif k == "list":
            node = (_LIST, self.type(t.args[0]), 0, None)
        elif k == "map":
            node = (_MAP, self.type(t.args[0]), self.type(t.args[1]), None)
        else:
            raise AssertionError(f"the C builder has no plan for IDL type {t}")
        self.index[key] = len(self.types)
        self.types.append(node)
        return self.index[key]

    def struct(self, name: str) -> tuple[Any, ...]:
        """The table row of struct or union `name`."""
        sdef = SCHEMA.structs[name]
        model = MODELS[name]
        fields = []
        for f in sdef.fields:
            required = model.model_fields[f.name].is_required()
            how, value = ("shared", None) if required else field_default(name, f.name)
            absent_ok = not required and how == "shared" and value is None
            type_index = self.type(f.type, (name, f.name) in EXPRESSIONS)
            nullable = f.optional and not required
            fields.append((f.name, type_index, required, nullable, _DEFAULTS[how], value, f.id, absent_ok))
        union = sdef.kind == "union"
        template = dict.fromkeys(f.name for f in sdef.fields) if union else None
        members = {f.name: i for i, f in enumerate(sdef.fields)} if union else None
        declined = any(s == name for s, _ in EXPRESSIONS)
        names = [f.name for f in sdef.fields]
        settled = names.index(SETTLED[name]) if name in SETTLED else -1
        plain = plain_classes()[name]
        # a copy of a set sized as set copies are sized: each model's fields set, copied from it, is then a straight
        # copy of its table (CPython's set_merge fast path) instead of an insert per name
        fields_set = set(set(names))
        return (model, union, tuple(fields), fields_set, template, members, plain, declined, settled)


@cache
def _plan() -> tuple[Any, dict[str, int]]:
    """(the compiled plan, struct index by name)."""
    assert _cbuild is not None
    tables = _Tables()
    rows = tuple(tables.struct(name) for name in SCHEMA.structs)
    slots = BaseModel.__dict__
    objects = (
        binary,
        expr,
        __import__("copy").deepcopy,
        NONFINITE["Infinity"],
        NONFINITE["-Infinity"],
        NONFINITE["NaN"],
        slots["__dict__"],
        slots["__pydantic_fields_set__"],
        slots["__pydantic_extra__"],
        slots["__pydantic_private__"],
    )
    return _cbuild.compile(tuple(tables.types), rows, objects), tables.structs


def json_build(name: str, parsed: Any) -> Any:
    """The `name` model built from JSON bytes (parsed by the C module's strict parser) or from parsed JSON
    (checked and converted in place), or None: not taken, or no C module."""
    if _cbuild is None:
        return None
    plan, index = _plan()
    try:
        return _cbuild.json_build(plan, index[name], parsed)
    except _cbuild.Fallback:
        return None


def json_write(obj: BaseModel) -> bytes | None:
    """Model `obj` as torch's JSON bytes (the text `json.dumps(to_jsonable(obj))` gives), or None: a value the C
    writer does not take (the reference path writes it or words the error), or no C module."""
    if _cbuild is None:
        return None
    plan, index = _plan()
    struct_index = index.get(type(obj).__name__)
    if struct_index is None:
        return None
    try:
        text: bytes = _cbuild.json_write(plan, struct_index, obj)
    except _cbuild.Fallback:
        return None
    return text


def thrift_build(data: bytes, start: int, name: str, codec: str, limit: int) -> tuple[Any, int] | None:
    """(the `name` model in canonical Thrift `codec` bytes `data[start:]`, values it holds), or None when the C
    reader does not take them (or is not built). TooMany as soon as more than `limit` values are read."""
    if _cbuild is None:
        return None
    plan, index = _plan()
    try:
        built: tuple[Any, int] = _cbuild.thrift_build(plan, index[name], data, start, codec == "compact", limit)
    except _cbuild.Fallback:
        return None
    return built


def thrift_check(payload: bytes, name: str, codec: str) -> bool:
    """Whether the C module holds Thrift `codec` bytes `payload` (an encode's output) to one `name` value within the
    IDL's rules, as `_thrift.fast.verify` does; False where it is not built or declines (`verify` decides then)."""
    if _cbuild is None or not hasattr(_cbuild, "thrift_check"):  # not built, or built before it existed
        return False
    plan, index = _plan()
    try:
        ok: bool = _cbuild.thrift_check(plan, index[name], payload, codec == "compact")
    except _cbuild.Fallback:
        return False
    return ok


_LIMIT = 2**62  # budgets past it are the same as none (a value takes a byte at least)


def thrift_plain(data: bytes, name: str, codec: str, limit: int) -> tuple[Any, int | None] | None:
    """(the `name` value in all of canonical Thrift `codec` bytes `data` as `_thrift.fast.decode_plain` builds it,
    the values it holds as `fast.count_values(data, 0, name, codec, limit)` counts them: `limit + 1` once past
    `limit`, None where that count declines a list or map longer than `limit`), or None when `decode_plain` would
    decline the bytes (or the C module is not built)."""
    if _cbuild is None:
        return None
    plan, index = _plan()
    try:
        read: tuple[Any, int | None] = _cbuild.thrift_plain(
            plan, index[name], data, codec == "compact", max(-_LIMIT, min(limit, _LIMIT))
        )
    except _cbuild.Fallback:
        return None
    return read
