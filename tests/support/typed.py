"""Hypothesis strategies for every model type, built from the IDL description (one module, reused by all
round-trip tests), plus a NaN-aware comparison of models.

    from support.typed import strategy_for, assert_same_model, MODEL_NAMES
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import cache
from typing import Any

from hypothesis import strategies as st
from hypothesis.internal.conjecture.data import ConjectureData
from hypothesis.internal.conjecture.utils import calc_label_from_name, many
from hypothesis.strategies import SearchStrategy
from hypothesis.strategies._internal.lazy import unwrap_strategies
from pydantic import BaseModel

from opwire.schema import models as m
from opwire.schema.idl import TypeRef
from support.typed_symexpr import SymExprs, sym_exprs

__all__ = [
    "MODEL_NAMES",
    "assert_identical",
    "assert_same_model",
    "mutate_bytes",
    "plain_strategy_for",
    "plain_type_strategy",
    "same_value",
    "strategy_for",
    "sym_exprs",
]

MODEL_NAMES: tuple[str, ...] = tuple(m.SCHEMA.structs)
"""Every struct and union of the IDL."""

_MAX_LIST = 3
_AVERAGE = min(5, 0.5 * _MAX_LIST)  # st.lists' and st.dictionaries' default average size

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


def plain_type_strategy(t: TypeRef) -> st.SearchStrategy[Any]:
    """Values of IDL type `t` as the models hold them (Hypothesis's own strategies, see `plain_strategy_for`)."""
    if t.kind == "enum":
        return st.sampled_from(list(getattr(m, str(t.name))))
    if t.kind == "struct":
        return st.deferred(lambda: plain_strategy_for(str(t.name)))
    if t.kind in ("list", "set"):
        return st.lists(plain_type_strategy(t.args[0]), max_size=_MAX_LIST)
    if t.kind == "map":
        return st.dictionaries(st.text(max_size=6), plain_type_strategy(t.args[1]), max_size=_MAX_LIST)
    return _primitive(t.kind)


def _overrides(name: str, fast: bool = False) -> dict[str, st.SearchStrategy[Any]]:
    """Fields of `name` drawn from a narrower strategy than their IDL type gives (`fast`: as `strategy_for` draws)."""
    if name == "SymExpr":  # only expressions opwire's strict grammar accepts (schema/symexpr.py)
        return {"expr_str": SymExprs() if fast else sym_exprs()}
    if name == "TensorValue":  # a padding is the Thrift writer's, only in an archive's tables: a model never has one
        return {"padding": st.none()}
    if name == "ExportedProgram":  # a program must carry a schema version this opwire reads
        major, minor = m.SCHEMA_VERSION
        return {"schema_version": st.builds(m.SchemaVersion, major=st.just(major), minor=st.integers(0, minor))}
    return {}


@cache
def plain_strategy_for(name: str) -> st.SearchStrategy[Any]:
    """Valid instances of the model `name`, spelled with Hypothesis's own strategies: `strategy_for` draws the same
    values from the same choices, faster (tests/test_typed.py replays one's choices through the other)."""
    sdef = m.SCHEMA.structs[name]
    cls = m.MODELS[name]
    if sdef.kind == "union":
        return st.one_of(*[st.builds(cls, **{f.name: plain_type_strategy(f.type)}) for f in sdef.fields])
    kwargs = {}
    for f in sdef.fields:
        s = plain_type_strategy(f.type)
        kwargs[f.name] = st.none() | s if f.optional else s
    return st.builds(cls, **(kwargs | _overrides(name)))


# ---------------------------------------------------------------------------------- the fast spelling
# Every model drawn by one strategy object per struct that makes Hypothesis's primitive choices itself (the leaf
# strategies' own do_draw, Hypothesis's `many` for collections): the choices, and the value each sequence of choices
# gives, are those of `plain_strategy_for`, without the 3-4 nested `data.draw` layers (span, validation, lazy
# unwrapping) per field that made generation most of these tests' CPU. It leans on Hypothesis internals
# (ConjectureData, conjecture.utils.many): tests/test_typed.py fails if a Hypothesis release draws differently.

_Drawer = Callable[[ConjectureData], Any]


def _leaf(strategy: st.SearchStrategy[Any]) -> _Drawer:
    """The leaf strategy's own draw, without `data.draw`'s wrapping."""
    inner = unwrap_strategies(strategy)
    inner.validate()
    return inner.do_draw


def _union_members(name: str) -> list[_Built]:
    """One strategy per member of the union `name`, as `plain_strategy_for` has one `st.builds` per member."""
    return [_Built(m.MODELS[name], f.name, _drawer(f.type)) for f in m.SCHEMA.structs[name].fields]


def _drawer(t: TypeRef) -> _Drawer:
    """Draw a value of IDL type `t` as `plain_type_strategy(t)` does."""
    if t.kind == "struct":
        model = strategy_for(str(t.name))
        return lambda data: data.draw(model)  # a span per struct, as Hypothesis's mutator likes
    if t.kind in ("list", "set"):
        element, label = _drawer(t.args[0]), calc_label_from_name(f"element {t.args[0]}")

        def draw_list(data: ConjectureData) -> list[Any]:
            out = []
            with many(data, min_size=0, max_size=_MAX_LIST, average_size=_AVERAGE) as elements:
                for _ in elements:  # a span per element labelled by its type, as data.draw(element) gave it
                    data.start_span(label)
                    out.append(element(data))
                    data.stop_span()
            return out

        return draw_list
    if t.kind == "map":
        key, value = _leaf(st.text(max_size=6)), _drawer(t.args[1])

        def draw_map(data: ConjectureData) -> dict[str, Any]:
            out: dict[str, Any] = {}
            with many(data, min_size=0, max_size=_MAX_LIST, average_size=_AVERAGE) as elements:
                for _ in elements:
                    for _try in range(3):  # st.dictionaries: a key already drawn is redrawn twice, then rejected
                        k = key(data)
                        if k not in out:
                            out[k] = value(data)
                            break
                    else:
                        elements.reject()
            return out

        return draw_map
    return _leaf(plain_type_strategy(t))


def _optional(t: TypeRef) -> _Drawer:
    """`st.none() | s`: Hypothesis flattens a union's members into the one_of, so None is one branch of 1 + members."""
    if t.kind == "struct" and m.SCHEMA.structs[str(t.name)].kind == "union":
        members = _union_members(str(t.name))

        def draw_optional_union(data: ConjectureData) -> Any:
            i = data.draw_integer(0, len(members))
            return data.draw(members[i - 1]) if i else None

        return draw_optional_union
    inner = _drawer(t)
    return lambda data: inner(data) if data.draw_integer(0, 1) else None


class _Built(SearchStrategy[Any]):
    """One member of a union drawn from `draw` (the span `st.builds` gives the branch)."""

    def __init__(self, cls: type[BaseModel], field: str, draw: _Drawer) -> None:
        super().__init__()
        self.cls, self.field, self.draw = cls, field, draw

    def calc_label(self) -> int:
        return calc_label_from_name(f"{self.cls.__name__}.{self.field}")

    def do_draw(self, data: ConjectureData) -> Any:
        return self.cls(**{self.field: self.draw(data)})


class _Model(SearchStrategy[Any]):
    """Instances of the model `name`, drawn as `plain_strategy_for(name)` draws them."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name
        self._draw: _Drawer | None = None

    def __repr__(self) -> str:
        return f"strategy_for({self.name!r})"

    def calc_label(self) -> int:  # one label per model: Hypothesis's mutator swaps spans of one label
        return calc_label_from_name(self.name)

    def _compile(self) -> _Drawer:
        sdef, cls = m.SCHEMA.structs[self.name], m.MODELS[self.name]
        if sdef.kind == "union":
            members = _union_members(self.name)
            if len(members) == 1:  # one_of of one strategy makes no choice
                return members[0].do_draw

            def draw_union(data: ConjectureData) -> Any:
                return data.draw(members[data.draw_integer(0, len(members) - 1)])

            return draw_union
        overrides = _overrides(self.name, fast=True)
        fields = [
            (
                f.name,
                _drawn(overrides[f.name]) if f.name in overrides else (_optional if f.optional else _drawer)(f.type),
            )
            for f in sdef.fields
        ]

        labels = [calc_label_from_name(f"field {f.type}") for f in sdef.fields]

        def draw_struct(data: ConjectureData) -> Any:
            kwargs = {}
            for (name, draw), label in zip(fields, labels):  # a span per field, as st.builds' data.draw gave it
                data.start_span(label)
                kwargs[name] = draw(data)
                data.stop_span()
            return cls(**kwargs)

        return draw_struct

    def do_draw(self, data: ConjectureData) -> Any:
        if self._draw is None:
            self._draw = self._compile()
        return self._draw(data)


def _drawn(strategy: st.SearchStrategy[Any]) -> _Drawer:
    return lambda data: data.draw(strategy)


@cache
def strategy_for(name: str) -> st.SearchStrategy[Any]:
    """Valid instances of the model `name` (any struct or union of the IDL)."""
    return _Model(name)


def same_value(a: Any, b: Any) -> bool:
    """Equality that treats NaN as equal to NaN and compares models field by field."""
    t = type(a)
    if t is not type(b):
        return False
    if t is float:
        return (a != a and b != b) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if isinstance(a, BaseModel):
        da, db = a.__dict__, b.__dict__
        for k in da:
            if not same_value(da[k], db[k]):
                return False
        return True
    if t is list:
        if len(a) != len(b):
            return False
        for x, y in zip(a, b):
            if not same_value(x, y):
                return False
        return True
    if t is dict:
        if list(a) != list(b):
            return False
        for k in a:
            if not same_value(a[k], b[k]):
                return False
        return True
    return bool(a == b)


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
