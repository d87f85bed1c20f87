"""Serialized `Argument` members -> Python values for a kernel call, one converter per member.

A converter is built once per argument (at plan time) and returns either a constant or a getter that
reads tensors and symbolic values by name at call time. Enum numbers go through one table each, built
from the IDL's enum names and torch's own serialized numbering (the serialized FLOAT is 7, c10's 7 is Double).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from opwire.errors import BindError, first_line
from opwire.schema import models as m
from opwire.schema.members import ARGUMENT, ENUM_OF, Carrier
from opwire.schema.models import SCHEMA
from opwire.serde import torch_enums

__all__ = ["Converted", "Lookup", "convert", "enum_tables", "enum_value"]

Lookup = Callable[[str], Any]
"""Value of a tensor, symbolic value or custom object by its serialized name."""


@dataclass(frozen=True)
class Converted:
    """A converted argument: a constant (`get` is None) or a getter reading named values at call time."""

    const: Any = None
    get: Callable[[Lookup], Any] | None = None
    tensors: int = 0
    """How many tensor names the getter reads (the AOTInductor tensor array holds as many)."""
    name: str | None = None
    """Set when the getter reads exactly one named value (lets a prepared call index the values directly)."""


def enum_tables() -> dict[str, dict[int, Any]]:
    """IDL enum -> {serialized number: torch object} (the one table of opwire.serde.torch_enums)."""
    return {enum: torch_enums.to_torch(enum) for enum in torch_enums.ENUMS}


def enum_value(enum: str, value: int, where: str) -> Any:
    """The torch object of serialized enum number `value`; 0/Unknown or unmapped numbers are BindErrors, and so is
    the `_mkldnn` layout (the op policy refuses oneDNN's opaque tensors: `policy_rules.REFUSED["to_mkldnn"]`)."""
    table = torch_enums.to_torch(enum)
    obj = table.get(int(value))
    if enum == "Layout" and str(obj) == "torch._mkldnn":
        raise BindError(
            f"{where}: layout _mkldnn makes oneDNN's opaque tensors, which ATen kernels outside oneDNN's crash on "
            "(index_add_, index_copy_, cummaxmin_backward: SIGSEGV); a file cannot ask for them (use Strided)"
        )
    if obj is None:
        names = dict((v, n) for n, v in SCHEMA.enums[enum].values)
        known = ", ".join(f"{v} ({names[v]})" for v in sorted(table))
        raise BindError(
            f"{where}: {enum} {int(value)} ({names.get(int(value), 'not in the IDL')}) names no torch {enum}; "
            f"expected one of {known}; rewrite the file with a concrete value"
        )
    return obj


def _sym(arg: m.SymIntArgument | m.SymFloatArgument | m.SymBoolArgument) -> Converted:
    if arg.as_name is not None:
        return _named(arg.as_name)
    return Converted(const=arg.value)


def _seq(parts: list[Converted]) -> Converted:
    """A list of converted elements: constant if every element is."""
    if all(p.get is None for p in parts):
        return Converted(const=[p.const for p in parts])
    getters = [(p.get, p.const) for p in parts]
    return Converted(
        get=lambda look: [g(look) if g is not None else c for g, c in getters], tensors=sum(p.tensors for p in parts)
    )


def _named(name: str, tensors: int = 0) -> Converted:
    return Converted(get=lambda look: look(name), tensors=tensors, name=name)


def _tensor(t: m.TensorArgument) -> Converted:
    return _named(t.name, 1)


def _opt_tensor(t: m.OptionalTensorArgument) -> Converted:
    return _tensor(t.as_tensor) if t.as_tensor is not None else Converted(const=None)


def _device(d: m.Device, where: str) -> Converted:
    import torch

    spelled = d.type if d.index is None else f"{d.type}:{d.index}"
    try:
        return Converted(const=torch.device(spelled))
    except (RuntimeError, ValueError) as exc:
        raise BindError(
            f"{where}: device {spelled!r} is not a device this torch knows ({first_line(exc)}); "
            "load the backend (or rename PrivateUse1) before running the file"
        ) from None


def convert(arg: m.Argument, where: str, ctx: Any) -> Converted:
    """Converter of one serialized argument; `ctx` resolves operators and subgraphs (the executor's resolver)."""
    return _BY_MEMBER[arg.type](arg.value, where, ctx)


_Handler = Callable[[Any, str, Any], Converted]


def _string_map(value: dict[str, m.Argument], where: str, ctx: Any) -> Converted:
    parts = {k: convert(v, f"{where}[{k!r}]", ctx) for k, v in value.items()}
    if all(p.get is None for p in parts.values()):
        return Converted(const={k: p.const for k, p in parts.items()})
    return Converted(
        get=lambda look: {k: (p.get(look) if p.get is not None else p.const) for k, p in parts.items()},
        tensors=sum(p.tensors for p in parts.values()),
    )


def _list_of(elem: _Handler) -> _Handler:
    return lambda v, w, c: _seq([elem(x, f"{w}[{i}]", c) for i, x in enumerate(v)])


def _enum(enum: str) -> _Handler:
    return lambda v, w, c: Converted(const=enum_value(enum, v, w))


# carrier kind (schema/members.py, read off the IDL) -> converter; lists and enums are built from the carrier
_BY_KIND: dict[str, _Handler] = {
    "none": lambda v, w, c: Converted(const=None),
    "tensor": lambda v, w, c: _tensor(v),
    "optional_tensor": lambda v, w, c: _opt_tensor(v),
    "int": lambda v, w, c: Converted(const=v),
    "float": lambda v, w, c: Converted(const=v),
    "bool": lambda v, w, c: Converted(const=v),
    "string": lambda v, w, c: Converted(const=v),
    "complex": lambda v, w, c: Converted(const=complex(v.real, v.imag)),
    "symbolic": lambda v, w, c: _sym(v),
    "device": lambda v, w, c: _device(v, w),
    "custom_obj": lambda v, w, c: _named(v.name),
    "operator": lambda v, w, c: Converted(const=c.operator(v, w)),
    "graph": lambda v, w, c: Converted(const=c.subgraph(v, w)),
}


def _handler(carrier: Carrier, member: str) -> _Handler:
    if carrier.kind == "list" and carrier.elem is not None:
        return _list_of(_handler(carrier.elem, member))
    if carrier.kind == "map" and carrier.elem == Carrier("argument"):
        return _string_map
    if carrier.kind in ENUM_OF:
        return _enum(ENUM_OF[carrier.kind])
    found = _BY_KIND.get(carrier.kind)
    if found is None:  # a member the IDL gained: classify it in schema/members.py and convert it here
        raise AssertionError(f"proxy_executor/convert.py has no conversion for Argument.{member} ({carrier.spelled})")
    return found


_BY_MEMBER: dict[str, _Handler] = {member: _handler(carrier, member) for member, carrier in ARGUMENT.items()}
