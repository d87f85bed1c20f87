"""Hypothesis strategies for every model type, built from the IDL description (one module, reused by all
round-trip tests), plus a NaN-aware comparison of models.

    from support.typed import strategy_for, assert_same_model, MODEL_NAMES
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any

from hypothesis import strategies as st
from pydantic import BaseModel

from opwire.schema import models as m
from opwire.schema.idl import TypeRef

__all__ = [
    "MODEL_NAMES",
    "assert_identical",
    "assert_same_model",
    "mutate_bytes",
    "same_value",
    "strategy_for",
    "sym_exprs",
    "type_strategy",
]

MODEL_NAMES: tuple[str, ...] = tuple(m.SCHEMA.structs)
"""Every struct and union of the IDL."""

_MAX_LIST = 3

_INT_BITS = {"i8": 8, "i16": 16, "i32": 32, "i64": 64}


def _primitive(kind: str) -> st.SearchStrategy[Any]:
    if kind in _INT_BITS:
        bits = _INT_BITS[kind]
        return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    if kind == "bool":
        return st.booleans()
    if kind == "double":
        return st.floats(allow_nan=True, allow_infinity=True)
    if kind == "string":
        return st.text(max_size=12)
    if kind == "binary":
        return st.binary(max_size=32)
    raise AssertionError(kind)


def type_strategy(t: TypeRef) -> st.SearchStrategy[Any]:
    """Values of IDL type `t` as the models hold them."""
    if t.kind == "enum":
        return st.sampled_from(list(getattr(m, str(t.name))))
    if t.kind == "struct":
        return st.deferred(lambda: strategy_for(str(t.name)))
    if t.kind in ("list", "set"):
        return st.lists(type_strategy(t.args[0]), max_size=_MAX_LIST)
    if t.kind == "map":
        return st.dictionaries(st.text(max_size=6), type_strategy(t.args[1]), max_size=_MAX_LIST)
    return _primitive(t.kind)


_SYMBOLS = st.from_regex(r"[su][0-9]{1,3}", fullmatch=True)


def sym_exprs() -> st.SearchStrategy[str]:
    """Expression strings of the forms torch's export writes: infix (`s0 + 1`) and srepr (`Add(Symbol('s0'), ...)`)."""
    atom = _SYMBOLS | st.integers(-(2**40), 2**40).map(str) | _SYMBOLS.map(lambda s: f"Symbol('{s}', integer=True)")

    def combine(parts: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        binary = st.tuples(parts, st.sampled_from(["+", "-", "*", "//", "%", "<", "<=", "=="]), parts)
        call = st.tuples(st.sampled_from(["Max", "Min", "FloorDiv", "CeilDiv", "Mod", "Add", "Mul"]), parts, parts)
        return binary.map(lambda t: f"({t[0]} {t[1]} {t[2]})") | call.map(lambda t: f"{t[0]}({t[1]}, {t[2]})")

    return st.recursive(atom, combine, max_leaves=6)


@cache
def strategy_for(name: str) -> st.SearchStrategy[Any]:
    """Valid instances of the model `name` (any struct or union of the IDL)."""
    sdef = m.SCHEMA.structs[name]
    cls = m.MODELS[name]
    if sdef.kind == "union":
        return st.one_of(*[st.builds(cls, **{f.name: type_strategy(f.type)}) for f in sdef.fields])
    kwargs = {}
    for f in sdef.fields:
        s = type_strategy(f.type)
        kwargs[f.name] = st.none() | s if f.optional else s
    if name == "SymExpr":  # only expressions opwire's strict grammar accepts (schema/symexpr.py)
        kwargs["expr_str"] = sym_exprs()
    if name == "TensorValue":  # a padding is the Thrift writer's, only in an archive's tables: a model never has one
        kwargs["padding"] = st.none()
    if name == "ExportedProgram":  # a program must carry a schema version this opwire reads
        major, minor = m.SCHEMA_VERSION
        kwargs["schema_version"] = st.builds(m.SchemaVersion, major=st.just(major), minor=st.integers(0, minor))
    return st.builds(cls, **kwargs)


def same_value(a: Any, b: Any) -> bool:
    """Equality that treats NaN as equal to NaN and compares models field by field."""
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if isinstance(a, BaseModel) and isinstance(b, BaseModel):
        return type(a) is type(b) and all(same_value(a.__dict__[k], b.__dict__[k]) for k in a.__dict__)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(same_value(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def assert_same_model(a: BaseModel, b: BaseModel) -> None:
    """Assert two models are equal (NaN-aware), showing both on failure."""
    assert same_value(a, b), f"models differ:\n{a!r}\n!=\n{b!r}"


def assert_identical(a: Any, b: Any, path: str = "$") -> None:
    """Identical structure, types, values and fields sets (NaN equal to NaN)."""
    assert type(a) is type(b), f"{path}: {type(a).__name__} vs {type(b).__name__}"
    if isinstance(a, BaseModel):
        assert a.__pydantic_fields_set__ == b.__pydantic_fields_set__, path
        assert a.__pydantic_extra__ is None and b.__pydantic_extra__ is None, path
        assert a.__pydantic_private__ is None and b.__pydantic_private__ is None, path
        assert list(a.__dict__) == list(b.__dict__), path
        for k in a.__dict__:
            assert_identical(a.__dict__[k], b.__dict__[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_identical(x, y, f"{path}[{i}]")
    elif isinstance(a, dict):
        assert list(a) == list(b), path
        for k in a:
            assert_identical(a[k], b[k], f"{path}[{k!r}]")
    elif isinstance(a, float) and math.isnan(a):
        assert math.isnan(b), path
    else:
        assert a == b, f"{path}: {a!r} vs {b!r}"


def mutate_bytes(data: bytes, draw: st.DrawFn, splices: list[bytes], repeat: int) -> bytes:
    """`data` with 1 to 3 of: a byte flipped, bytes spliced in (one of `splices` or a few drawn), bytes deleted, the
    rest cut off, or a run of bytes repeated up to `repeat` times (what hostile encodings of a valid value look like)."""
    for _ in range(draw(st.integers(1, 3))):
        n = len(data)
        pos = draw(st.integers(0, max(n - 1, 0)))
        kind = draw(st.sampled_from(("flip", "splice", "delete", "truncate", "repeat")))
        if kind == "flip" and n:
            data = data[:pos] + bytes([data[pos] ^ draw(st.integers(1, 255))]) + data[pos + 1 :]
        elif kind == "splice":
            data = data[:pos] + draw(st.sampled_from(splices) | st.binary(min_size=1, max_size=6)) + data[pos:]
        elif kind == "delete":
            data = data[:pos] + data[pos + draw(st.integers(1, 8)) :]
        elif kind == "truncate":
            data = data[:pos]
        else:
            data = data[:pos] + data[pos : pos + draw(st.integers(1, 6))] * draw(st.integers(2, repeat)) + data[pos:]
    return data
