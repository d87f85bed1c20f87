"""Python values of a live dispatcher call -> `Argument`s, the member picked from the schema/ops.py table.

The recorder knows what Python handed the kernel (a tensor, an int, a list of tensors and None, a
dtype, ...); the table says which `Argument` members may carry the schema type. The first member
of the value's candidates that the table allows is written; a value no allowed member carries is an
`EncodeError` naming the op and argument.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from opwire.errors import EncodeError
from opwire.schema import models as m
from opwire.schema.ops import OpArg, input_members, return_members
from opwire.serde import objects as _values
from opwire.serde import tensors as _tensors

__all__ = ["TensorNamer", "default_value", "to_argument"]

TensorNamer = Callable[[torch.Tensor], str]
"""Gives the trace name of a tensor (and stores it in the tensor table)."""


def _scalar_kind(v: Any) -> str:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "float"
    if isinstance(v, complex):
        return "complex"
    return type(v).__name__


# Python value kind -> members that can hold it, most specific first.
_CANDIDATES: dict[str, tuple[str, ...]] = {
    "none": ("as_none",),
    "tensor": ("as_tensor", "as_optional_tensor"),
    "bool": ("as_bool", "as_sym_bool"),
    "int": ("as_int", "as_sym_int"),
    "float": ("as_float", "as_sym_float"),
    "complex": ("as_complex",),
    "str": ("as_string",),
    "dtype": ("as_scalar_type",),
    "layout": ("as_layout",),
    "memory_format": ("as_memory_format",),
    "device": ("as_device",),
    "list:tensor": ("as_tensors", "as_optional_tensors"),
    "list:optional_tensor": ("as_optional_tensors",),
    "list:bool": ("as_bools",),
    "list:int": ("as_ints", "as_sym_ints"),
    "list:float": ("as_floats", "as_sym_floats"),
    "list:number": ("as_floats",),
    "list:str": ("as_strings",),
    "list:tensor_list": ("as_nested_tensors",),
    "list:int_list": ("as_int_lists",),
    "list:float_list": ("as_float_lists",),
}


def _kind(v: Any) -> str:
    if v is None:
        return "none"
    if isinstance(v, torch.Tensor):
        return "tensor"
    if isinstance(v, bool | int | float | complex):
        return _scalar_kind(v)
    if isinstance(v, str):
        return "str"
    for name, typ in (("dtype", torch.dtype), ("layout", torch.layout), ("memory_format", torch.memory_format)):
        if isinstance(v, typ):
            return name
    if isinstance(v, torch.device):
        return "device"
    if isinstance(v, list | tuple):
        return "list:" + _list_kind(v)
    return type(v).__name__


def _list_kind(v: list[Any] | tuple[Any, ...]) -> str:
    kinds = {_kind(x) for x in v}
    if not kinds:
        return "int"  # an empty list: every list member writes it the same way
    if kinds <= {"tensor"}:
        return "tensor"
    if kinds <= {"tensor", "none"}:
        return "optional_tensor"
    if len(kinds) == 1:
        (k,) = kinds
        return {"list:tensor": "tensor_list", "list:int": "int_list", "list:float": "float_list"}.get(k, k)
    if kinds <= {"int", "float"}:
        return "number"
    return "mixed"


def _build(member: str, v: Any, name_of: TensorNamer, where: str) -> m.Argument:
    """The Argument with `member` set to value `v`."""
    if member == "as_none":
        return m.Argument(as_none=True)
    if member in ("as_tensor",):
        return m.Argument(as_tensor=m.TensorArgument(name=name_of(v)))
    if member == "as_optional_tensor":
        return m.Argument(as_optional_tensor=m.OptionalTensorArgument(as_tensor=m.TensorArgument(name=name_of(v))))
    if member == "as_tensors":
        return m.Argument(as_tensors=[m.TensorArgument(name=name_of(t)) for t in v])
    if member == "as_optional_tensors":
        return m.Argument(as_optional_tensors=[_optional(t, name_of) for t in v])
    if member == "as_nested_tensors":
        return m.Argument(as_nested_tensors=[[m.TensorArgument(name=name_of(t)) for t in ts] for ts in v])
    if member == "as_complex":
        return m.Argument(as_complex=m.ComplexValue(real=complex(v).real, imag=complex(v).imag))
    if member == "as_scalar_type":
        return m.Argument(as_scalar_type=_tensors.scalar_type_of(v, where))
    if member in ("as_layout", "as_memory_format", "as_device"):
        return m.Argument(**{member: _values.from_python(v, where).value})
    if member == "as_floats":
        return m.Argument(as_floats=[float(x) for x in v])
    if member in ("as_ints", "as_bools", "as_strings", "as_int_lists"):
        return m.Argument(**{member: list(v) if member != "as_int_lists" else [list(x) for x in v]})
    if member == "as_float_lists":
        return m.Argument(as_float_lists=[[float(x) for x in xs] for xs in v])
    if member == "as_float":
        return m.Argument(as_float=float(v))
    return m.Argument(**{member: v})  # as_int, as_bool, as_string


def _optional(t: torch.Tensor | None, name_of: TensorNamer) -> m.OptionalTensorArgument:
    if t is None:
        return m.OptionalTensorArgument(as_none=True)
    return m.OptionalTensorArgument(as_tensor=m.TensorArgument(name=name_of(t)))


def to_argument(v: Any, arg: OpArg, op: str, name_of: TensorNamer, role: str = "input") -> m.Argument:
    """The Argument carrying value `v` of schema argument (or return) `arg` of `op`."""
    allowed = input_members(arg.parsed) if role == "input" else return_members(arg.parsed)
    kind = _kind(v)
    if kind == "int" and arg.parsed.kind == "base" and arg.parsed.name in ("float", "SymFloat"):
        kind, v = "float", float(v)
    where = f"{op}({arg.name or 'return'})"
    for member in _CANDIDATES.get(kind, ()):
        if member in allowed:
            return _build(member, v, name_of, where)
    raise EncodeError(
        f"Expected a value of schema type {arg.type} that an Argument member ({', '.join(sorted(allowed)) or 'none'}) "
        f"carries, got {type(v).__name__} - at `{where}`; exclude the op from recording (exclude=[{op!r}])",
        where,
    )


def default_value(arg: OpArg) -> Any:
    """The Python value of a schema default (enum defaults come from their spelling, not c10's numbers)."""
    base = arg.parsed.elem if arg.parsed.kind == "optional" else arg.parsed
    if arg.default is not None and base.kind == "base" and base.name in ("ScalarType", "Layout", "MemoryFormat"):
        spelled = getattr(torch, str(arg.default_str), None)
        if spelled is None:
            raise EncodeError(f"cannot read the default {arg.default_str!r} of argument {arg.name} ({arg.type})")
        return spelled
    return arg.default
