"""The values an `Argument` names, found and renamed by walkers built from the IDL (not a member ladder).

A walker is built once per IDL type and kind of leaf: it reaches every leaf (`TensorArgument` for
`tensor_names`; tensors, symbols, tokens and custom objects for `value_names`) through unions, structs,
lists and maps, and stops at subgraphs (`GraphArgument`), whose values belong to the subgraph.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

from opwire.schema import models as m
from opwire.schema.idl import TypeRef
from opwire.schema.models import SCHEMA

__all__ = ["member_tensor_names", "rename_tensors", "tensor_names", "value_names"]

_Find = Callable[[Any], list[str]]
_Map = Callable[[Any, Callable[[str], str]], Any]
_OPAQUE = frozenset({"GraphArgument"})  # a subgraph's tensors are its own


def _sym_name(v: Any) -> list[str]:
    return [] if v.as_name is None else [v.as_name]


# leaf struct -> the names one instance carries, per walk
_TENSORS: dict[str, _Find] = {"TensorArgument": lambda v: [v.name]}
_VALUES: dict[str, _Find] = {
    **_TENSORS,
    "SymIntArgument": _sym_name,
    "SymFloatArgument": _sym_name,
    "SymBoolArgument": _sym_name,
    "TokenArgument": lambda v: [v.name],
    "CustomObjArgument": lambda v: [v.name],
}
_LEAVES = {"tensors": _TENSORS, "values": _VALUES}


@cache
def _carries(t: TypeRef, leaves: str = "tensors") -> bool:
    """Whether a value of type `t` can hold a leaf of `leaves` outside a subgraph."""
    table = _LEAVES[leaves]
    seen: set[str] = set()
    todo = [t]
    while todo:
        cur = todo.pop()
        if cur.kind == "struct":
            name = str(cur.name)
            if name in table:
                return True
            if name in seen or name in _OPAQUE:
                continue
            seen.add(name)
            todo += [f.type for f in SCHEMA.structs[name].fields]
        else:
            todo += list(cur.args)
    return False


@cache
def _finder(t: TypeRef, leaves: str = "tensors") -> _Find | None:
    """Collects leaf names from a value of type `t`; None when the type carries none."""
    if not _carries(t, leaves):
        return None
    if t.kind in ("list", "set", "map"):
        inner = _finder(t.args[-1], leaves)
        assert inner is not None
        if t.kind == "map":
            return lambda v: [n for x in v.values() for n in inner(x)]
        return lambda v: [n for x in v for n in inner(x)]
    name = str(t.name)
    leaf = _LEAVES[leaves].get(name)
    if leaf is not None:
        return leaf
    # field finders are looked up on first use: recursive types (Argument in Argument) build lazily
    return lambda v: [
        n for fname, fn in _field_finders(name, leaves) if (x := v.__dict__.get(fname)) is not None for n in fn(x)
    ]


@cache
def _field_finders(name: str, leaves: str) -> tuple[tuple[str, _Find], ...]:
    found = ((f.name, _finder(f.type, leaves)) for f in SCHEMA.structs[name].fields)
    return tuple((fname, fn) for fname, fn in found if fn is not None)


@cache
def _mapper(t: TypeRef) -> _Map | None:
    """Rebuilds a value of type `t` with every tensor renamed; None when the type carries none."""
    if not _carries(t):
        return None
    if t.kind in ("list", "set", "map"):
        inner = _mapper(t.args[-1])
        assert inner is not None
        if t.kind == "map":
            return lambda v, fresh: {k: inner(x, fresh) for k, x in v.items()}
        return lambda v, fresh: [inner(x, fresh) for x in v]
    name = str(t.name)
    cls = m.MODELS[name]
    if name == "TensorArgument":
        return lambda v, fresh: m.TensorArgument(name=fresh(v.name))
    union = SCHEMA.structs[name].kind == "union"

    def rebuild(v: Any, fresh: Callable[[str], str]) -> Any:
        d = v.__dict__
        kwargs = {k: d[k] if fn is None or d[k] is None else fn(d[k], fresh) for k, fn in _field_mappers(name)}
        if union:
            kwargs = {k: x for k, x in kwargs.items() if x is not None}
        return cls(**kwargs)

    return rebuild


@cache
def _field_mappers(name: str) -> tuple[tuple[str, _Map | None], ...]:
    return tuple((f.name, _mapper(f.type)) for f in SCHEMA.structs[name].fields)


_ARGUMENT_FINDERS = {f.name: _finder(f.type) for f in SCHEMA.structs["Argument"].fields}
_VALUE_FINDERS = {f.name: _finder(f.type, "values") for f in SCHEMA.structs["Argument"].fields}


def tensor_names(arg: m.Argument) -> list[str]:
    """Every tensor name `arg` carries, in order (None entries of optional lists left out, subgraphs not entered)."""
    return member_tensor_names(arg.type, arg.value)


def member_tensor_names(member: str, value: Any) -> list[str]:
    """`tensor_names` of an Argument whose member `member` holds `value`: a model, or a value `thrift.decode_plain`
    read (its structs' fields in `__dict__`, those absent left out)."""
    fn = _ARGUMENT_FINDERS[member]
    return [] if fn is None else fn(value)


def value_names(arg: m.Argument) -> list[str]:
    """Every named value `arg` reads, in order: tensors, symbols, tokens and custom objects (not in subgraphs)."""
    fn = _VALUE_FINDERS[arg.type]
    return [] if fn is None else fn(arg.value)


def rename_tensors(arg: m.Argument, fresh: Callable[[str], str]) -> m.Argument:
    """A copy of `arg` with every tensor name `n` replaced by `fresh(n)` (the same model when it names none)."""
    fn = _mapper(TypeRef("struct", "Argument"))
    return arg if fn is None or not tensor_names(arg) else fn(arg, fresh)
