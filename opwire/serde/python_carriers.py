"""Python objects <-> the members of `Argument` and `Value`, built from the IDL types (schema/members.py).

`carrier_of(obj)` is the one table from Python types to what a member carries ("tensor", "int",
"list[optional_tensor]", ...). `to_member(union, member)` and `from_member(union, member)` are
converters compiled once per member from the member's IDL type: lists and maps map their element
converter, structs and enums come from `_STRUCTS`/`_ENUMS` below. The recorder (Python values ->
Argument), the Values files (`Value` both ways) and anything else converting Python values read these.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

import torch

from opwire.errors import DecodeError, EncodeError
from opwire.schema import models as m
from opwire.schema.base import assembled
from opwire.schema.idl import TypeRef
from opwire.schema.members import VALUE, Carrier
from opwire.serde import tensors, torch_enums

__all__ = ["Names", "carrier_of", "from_member", "to_member"]

Names = Callable[[torch.Tensor], str]
"""Names a tensor (for TensorArgument members: the trace or graph name it gets)."""
To = Callable[[Any, str, Names | None], Any]
From = Callable[[Any, str, Any], Any]

_SCALARS: tuple[tuple[type, Carrier], ...] = (
    (bool, Carrier("bool")),  # before int: bool is an int subclass
    (int, Carrier("int")),
    (float, Carrier("float")),
    (complex, Carrier("complex")),
    (str, Carrier("string")),
    (torch.Tensor, Carrier("tensor")),
    (torch.dtype, Carrier("dtype")),
    (torch.layout, Carrier("layout")),
    (torch.memory_format, Carrier("memory_format")),
    (torch.device, Carrier("device")),
)
_NONE, _TENSOR, _INT, _FLOAT = Carrier("none"), Carrier("tensor"), Carrier("int"), Carrier("float")


def carrier_of(obj: Any) -> Carrier | None:
    """What a member must carry to hold `obj` (lists by their elements), or None when no member can."""
    if obj is None:
        return _NONE
    for typ, carrier in _SCALARS:
        if isinstance(obj, typ):
            return carrier
    if isinstance(obj, list | tuple):
        return _list_carrier(obj)
    return None


def _list_carrier(values: list[Any] | tuple[Any, ...]) -> Carrier | None:
    kinds = {carrier_of(x) for x in values}
    if not kinds:
        return Carrier("list", _INT)  # an empty list: every list member writes it the same way
    if kinds <= {_TENSOR, _NONE} and _TENSOR in kinds and _NONE in kinds:
        return Carrier("list", Carrier("optional_tensor"))
    if kinds == {_INT, _FLOAT}:
        return Carrier("list", _FLOAT)
    if len(kinds) == 1 and None not in kinds:
        (k,) = kinds
        return Carrier("list", k)
    return None


# ------------------------------------------------------------------------------- Python -> members
def _named_tensor(v: Any, where: str, names: Names | None) -> m.TensorArgument:
    if names is None:
        raise EncodeError(f"Expected no tensor here, got one - at `{where}` (no tensor names in this context)", where)
    name = names(v)
    if type(name) is str:  # a name the caller made: nothing for validation to check
        return assembled(m.TensorArgument, {"name": name})
    return m.TensorArgument(name=name)


def _optional_tensor(v: Any, where: str, names: Names | None) -> m.OptionalTensorArgument:
    if v is None:
        return m.OptionalTensorArgument(as_none=True)
    return m.OptionalTensorArgument(as_tensor=_named_tensor(v, where, names))


def _symbolic(union: type[Any], member: str, cast: Callable[[Any], Any]) -> To:
    return lambda v, where, names: union(**{member: cast(v)})


def _enum_to(enum: str) -> To:
    table = torch_enums.from_torch(enum)

    def convert(v: Any, where: str, names: Names | None) -> Any:
        if enum == "ScalarType":
            return tensors.scalar_type_of(v, where)
        if v not in table:
            raise EncodeError(f"Expected a {enum} the export schema names, got {v} - at `{where}`", where)
        return table[v]

    return convert


_STRUCTS_TO: dict[str, To] = {
    "TensorArgument": _named_tensor,
    "TensorValue": lambda v, where, names: tensors.from_tensor(v, where),
    "OptionalTensorArgument": _optional_tensor,
    "SymIntArgument": _symbolic(m.SymIntArgument, "as_int", int),
    "SymFloatArgument": _symbolic(m.SymFloatArgument, "as_float", float),
    "SymBoolArgument": _symbolic(m.SymBoolArgument, "as_bool", bool),
    "ComplexValue": lambda v, where, names: m.ComplexValue(real=complex(v).real, imag=complex(v).imag),
    "Device": lambda v, where, names: m.Device(type=v.type, index=v.index),
    "Value": lambda v, where, names: value_of(v, where),
}
_PRIMITIVES_TO: dict[str, To] = {
    "i64": lambda v, where, names: int(v),
    "double": lambda v, where, names: float(v),
    "bool": lambda v, where, names: bool(v),
    "string": lambda v, where, names: str(v),
}


def _compile(ref: TypeRef, where: str, leaf: Callable[[TypeRef, str], Any]) -> Any:
    """A converter for `ref`: lists and maps convert each element with their element's converter."""
    if ref.kind == "list":
        elem = _compile(ref.args[0], where, leaf)
        return lambda v, w, extra: [elem(x, f"{w}[{i}]", extra) for i, x in enumerate(v)]
    if ref.kind == "map":
        val = _compile(ref.args[1], where, leaf)
        return lambda v, w, extra: {str(k): val(x, f"{w}[{k!r}]", extra) for k, x in v.items()}
    return leaf(ref, where)


def _leaf_to(ref: TypeRef, where: str) -> To:
    if ref.kind == "enum":
        return _enum_to(str(ref.name))
    table = _STRUCTS_TO if ref.kind == "struct" else _PRIMITIVES_TO
    found = table.get(str(ref.name if ref.kind == "struct" else ref.kind))
    if found is None:
        raise EncodeError(f"no Python value converts to {ref.spelled()} (member {where})", where)
    return found


@cache
def to_member(union: str, member: str) -> To:
    """Converter of a Python value to what `member` of `union` holds: `(value, where, names) -> model value`."""
    if member == "as_none":
        return lambda v, where, names: True
    field = next(f for f in m.SCHEMA.structs[union].fields if f.name == member)
    converter: To = _compile(field.type, f"{union}.{member}", _leaf_to)
    return converter


def value_of(obj: Any, where: str = "value") -> m.Value:
    """The Value holding a Python object (lists and str-keyed dicts of Values nest); EncodeError otherwise."""
    if isinstance(obj, list | tuple):
        return m.Value(as_list=[value_of(x, f"{where}[{i}]") for i, x in enumerate(obj)])
    if isinstance(obj, dict) and all(isinstance(k, str) for k in obj):
        return m.Value(as_dict={k: value_of(x, f"{where}[{k!r}]") for k, x in obj.items()})
    carrier = carrier_of(obj)
    member = _VALUE_MEMBERS.get(carrier) if carrier is not None else None
    if member is None:
        raise EncodeError(
            f"Expected a tensor, number, string, None, device, dtype, list or str-keyed dict, got "
            f"{type(obj).__name__} - at `{where}`",
            where,
        )
    return m.Value(**{member: to_member("Value", member)(obj, where, None)})


# ------------------------------------------------------------------------------- members -> Python
def _enum_from(enum: str) -> From:
    back = torch_enums.to_torch(enum)

    def convert(v: Any, where: str, device: Any) -> Any:
        if enum == "ScalarType":
            return tensors.torch_dtype(v, where)
        if int(v) not in back:
            raise DecodeError(f"Expected a {enum} torch knows, got {v!r} - at `{where}`", where)
        return back[int(v)]

    return convert


_STRUCTS_FROM: dict[str, From] = {
    "TensorValue": lambda v, where, device: tensors.to_tensor(v, device, where),
    "ComplexValue": lambda v, where, device: complex(v.real, v.imag),
    "Device": lambda v, where, device: tensors.device_of(v, where),
    "Value": lambda v, where, device: python_of(v, device, where),
}


def _leaf_from(ref: TypeRef, where: str) -> From:
    if ref.kind == "enum":
        return _enum_from(str(ref.name))
    if ref.kind == "struct":
        found = _STRUCTS_FROM.get(str(ref.name))
        if found is None:
            raise DecodeError(f"no Python value is read from {ref.spelled()} (member {where})", where)
        return found
    return lambda v, where, device: v  # primitives are Python values already


@cache
def from_member(union: str, member: str) -> From:
    """Converter of what `member` of `union` holds back to a Python value: `(value, where, device) -> object`."""
    if member == "as_none":
        return lambda v, where, device: None
    field = next(f for f in m.SCHEMA.structs[union].fields if f.name == member)
    converter: From = _compile(field.type, f"{union}.{member}", _leaf_from)
    return converter


def python_of(value: m.Value, device: str | torch.device | None = None, where: str = "value") -> Any:
    """The Python object a Value holds (lists come back as lists, tensors on their device or `device`)."""
    member = value.type
    return from_member("Value", member)(value.value, f"{where}.{member}", device)


def _value_members() -> dict[Carrier, str]:
    """Python carrier -> the Value member holding it; every scalar member of Value is reachable or this fails."""
    table = {c: name for name, c in VALUE.items() if c.kind not in ("list", "map")}
    missing = [c.spelled for _, c in _SCALARS if c not in table]
    if missing or set(table) - {c for _, c in _SCALARS} - {_NONE}:
        raise AssertionError(
            f"Value members and Python carriers disagree: unmatched {missing or sorted(c.spelled for c in table)}"
        )
    return table


_VALUE_MEMBERS = _value_members()
