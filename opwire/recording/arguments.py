"""Python values of a live dispatcher call -> `Argument`s, the member picked from the schema/ops.py table.

The recorder knows what Python handed the kernel (a tensor, an int, a list of tensors and None, a
dtype, ...): `serde.python_carriers.carrier_of` says what a member must carry to hold it, and the IDL
(`schema/members.py`) which members carry that; the ops table says which members may carry the schema
type. The first candidate the table allows is written; a value no allowed member carries is an
`EncodeError` naming the op and argument.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cache
from typing import Any

import torch

from opwire.errors import EncodeError
from opwire.schema import models as m
from opwire.schema.base import assembled
from opwire.schema.members import Carrier, members_carrying
from opwire.schema.ops import OpArg, OpSchema, input_members, return_members
from opwire.serde.python_carriers import carrier_of, to_member

__all__ = ["TensorNamer", "bind_arguments", "c10_enum", "default_value", "named_inputs", "to_argument"]

TensorNamer = Callable[[torch.Tensor], str]
"""Gives the trace name of a tensor (and stores it in the tensor table)."""

_INT, _FLOAT = Carrier("int"), Carrier("float")
_NAMED = frozenset({"as_tensor", "as_tensors"})
"""The members holding only TensorArguments (`TensorNamer`'s names), built without re-validation."""


def _wider(c: Carrier) -> Carrier | None:
    """The carrier that also holds `c` where the schema asks for more (a tensor where `Tensor?` is expected)."""
    if c.kind == "tensor":
        return Carrier("optional_tensor")
    if c.kind in ("int", "float", "bool"):
        return Carrier("symbolic", c)
    if c.kind == "list" and c.elem is not None:
        inner = _wider(c.elem)
        return Carrier("list", inner) if inner is not None else None
    return None


@cache
def _empty_list_candidates() -> tuple[str, ...]:
    """Members that can hold an empty list, of any element type (what the schema type allows decides)."""
    kinds = ("tensor", "optional_tensor", "int", "float", "bool", "string")
    return tuple(dict.fromkeys(member for k in kinds for member in members_carrying(Carrier("list", Carrier(k)))))


@cache
def _candidates(c: Carrier) -> tuple[str, ...]:
    """Argument members that can hold a value carried as `c`, most specific first (derived from the IDL)."""
    wider = _wider(c)
    return members_carrying(c) + (members_carrying(wider) if wider is not None else ())


def to_argument(v: Any, arg: OpArg, op: str, name_of: TensorNamer, role: str = "input") -> m.Argument:
    """The Argument carrying value `v` of schema argument (or return) `arg` of `op`."""
    allowed = input_members(arg.parsed) if role == "input" else return_members(arg.parsed)
    carrier = carrier_of(v)
    if carrier == _INT and arg.parsed.kind == "base" and arg.parsed.name in ("float", "SymFloat"):
        carrier, v = _FLOAT, float(v)
    where = f"{op}({arg.name or 'return'})"
    if isinstance(v, list | tuple) and not v:  # `[]` for a `Tensor[]` (a fused optimizer's unused state lists)
        candidates = _empty_list_candidates()
    else:
        candidates = _candidates(carrier) if carrier is not None else ()
    for member in candidates:
        if member in allowed:
            value = to_member("Argument", member)(v, where, name_of)
            if member in _NAMED:  # TensorArguments named just now: validating them again checks nothing
                return assembled(m.Argument, {member: value})
            return m.Argument(**{member: value})
    raise EncodeError(
        f"Expected a value of schema type {arg.type} that an Argument member ({', '.join(sorted(allowed)) or 'none'}) "
        f"carries, got {type(v).__name__} - at `{where}`; exclude the op from recording (exclude=[{op!r}])",
        where,
    )


_ENUM_OBJECTS = {"ScalarType": torch.dtype, "Layout": torch.layout, "MemoryFormat": torch.memory_format}


@cache
def c10_enum(kind: str) -> dict[int, Any]:
    """c10's number -> torch object for a schema enum type, derived from torch's own schema parser: every
    dtype (layout, memory format) torch names is parsed as a default, and the number the parser gives kept."""
    out: dict[int, Any] = {}
    for name in dir(torch):
        obj = getattr(torch, name, None)
        if isinstance(obj, _ENUM_OBJECTS[kind]):
            try:
                number = torch._C.parse_schema(f"f({kind}? x={name}) -> ()").arguments[0].default_value
            except RuntimeError:  # a name the schema language does not spell
                continue
            if isinstance(number, int):
                out.setdefault(number, obj)
    return out


def default_value(arg: OpArg) -> Any:
    """The Python value of a schema default: enum defaults torch prints as c10 numbers (`dtype=4`) or names."""
    base = arg.parsed.elem if arg.parsed.kind == "optional" else arg.parsed
    if arg.default is not None and base.kind == "base" and base.name in _ENUM_OBJECTS:
        spelled_as = str(arg.default_str)
        if spelled_as.lstrip("-").isdigit():
            spelled = c10_enum(base.name).get(int(spelled_as))
        else:
            spelled = getattr(torch, spelled_as, None)
        if not isinstance(spelled, _ENUM_OBJECTS[base.name]):
            raise EncodeError(f"cannot read the default {arg.default_str!r} of argument {arg.name} ({arg.type})")
        return spelled
    return arg.default


def bind_arguments(schema: OpSchema, args: Sequence[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """Argument name -> value, as the dispatcher passed them to an op (positional first, then keywords)."""
    names = [a.name for a in schema.arguments]
    if len(args) > len(names):
        raise EncodeError(f"{schema.qualname} got {len(args)} positional arguments, its schema has {len(names)}")
    bound = dict(zip(names, args))
    for k, v in kwargs.items():
        if k not in names:
            raise EncodeError(f"{schema.qualname} got an argument {k!r} its schema {schema.schema!r} lacks")
        bound[k] = v
    return bound


def named_inputs(
    schema: OpSchema, bound: dict[str, Any], write_defaults: bool, convert: Callable[[Any, OpArg], m.Argument]
) -> list[m.NamedArgument]:
    """A call's inputs in schema order: what was passed, plus defaults when `write_defaults`; `convert` each."""
    out = []
    for a in schema.arguments:
        if a.name in bound:
            value = bound[a.name]
        elif write_defaults and a.has_default:
            value = default_value(a)
        else:
            continue
        kind = m.ArgumentKind.KEYWORD if a.kwarg_only else m.ArgumentKind.POSITIONAL
        arg = convert(value, a)
        # the schema's name, an Argument built here, the enum: what validation would keep as they are
        if type(arg) is m.Argument and type(a.name) is str:
            out.append(assembled(m.NamedArgument, {"name": a.name, "arg": arg, "kind": kind}))
        else:
            out.append(m.NamedArgument(name=a.name, arg=arg, kind=kind))
    return out
