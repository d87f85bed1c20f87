"""Operator schemas and the one table of which `Argument` members can carry each schema type.

The executor, the recorder and the validator all read the table here. The operator-schema model
(`OpSchema`, `OpArg`: torch `FunctionSchema` <-> model <-> snapshot) lives in `opschema.py` and is
re-exported. torch is imported lazily, so `import opwire.schema` stays light.
"""

from __future__ import annotations

import re

from opwire.schema._optype import SchemaType, parse_type
from opwire.schema.models import SCHEMA
from opwire.schema.opschema import OpArg, OpSchema, op_schema, parse_op_schema

__all__ = [
    "ARGUMENT_MEMBERS",
    "NOT_CARRIABLE",
    "OpArg",
    "OpSchema",
    "SchemaType",
    "input_members",
    "op_schema",
    "parse_op_schema",
    "parse_type",
    "return_members",
    "why_not_carriable",
]

ARGUMENT_MEMBERS: tuple[str, ...] = tuple(f.name for f in SCHEMA.structs["Argument"].fields)
"""Every member of the `Argument` union, in IDL order."""


def _m(*names: str) -> frozenset[str]:
    """A member set, each name checked against the IDL's `Argument` union."""
    unknown = [n for n in names if n not in ARGUMENT_MEMBERS]
    if unknown:
        raise AssertionError(f"ops table names {unknown} which the Argument union does not define")
    return frozenset(names)


_NONE = _m("as_none")
_INT = _m("as_int", "as_sym_int")
_FLOAT = _m("as_float", "as_sym_float")  # the tracer turns an int passed to a float argument into a float
_BOOL = _m("as_bool", "as_sym_bool")
_INTS = _m("as_ints", "as_sym_ints")
_FLOATS = _m("as_floats", "as_sym_floats")
_BOOLS = _m("as_bools", "as_sym_bools")
_SCALARS = _INTS | _FLOATS | _BOOLS
# A number passed where a Tensor is expected (x * 2 exports as aten.mul.Tensor(x, 2)): a wrapped number.
_WRAPPED_NUMBER = _INT | _FLOAT | _BOOL | _m("as_complex")

# Base schema type -> members that carry it as an input.
_INPUT_BASE: dict[str, frozenset[str]] = {
    "Tensor": _m("as_tensor") | _WRAPPED_NUMBER,
    "int": _INT,
    "SymInt": _INT,
    "float": _FLOAT,
    "SymFloat": _FLOAT,
    "bool": _BOOL,
    "SymBool": _BOOL,
    "str": _m("as_string"),
    "Scalar": _INT | _FLOAT | _BOOL | _m("as_complex"),
    "complex": _m("as_complex"),
    "ScalarType": _m("as_scalar_type"),
    "Layout": _m("as_layout"),
    "MemoryFormat": _m("as_memory_format"),
    "Device": _m("as_device"),
    # torch's C++ proxy executor accepts these for `Any`; serialize_input writes them for such values.
    "Any": _m("as_string", "as_int", "as_float", "as_bool", "as_tensor", "as_none"),
    # Pseudo-types of higher-order ops (no FunctionSchema): subgraphs and operators passed as values.
    "GraphModule": _m("as_graph"),
    "Operator": _m("as_operator"),
}
# Element type (spelled) of a list -> members that carry the list as an input.
_INPUT_LIST: dict[str, frozenset[str]] = {
    "Tensor": _m("as_tensors"),
    "Tensor?": _m("as_optional_tensors", "as_tensors"),  # all-tensor lists are written as as_tensors
    "Tensor[]": _m("as_nested_tensors"),
    "int": _INTS,
    "SymInt": _INTS,
    "int[]": _m("as_int_lists"),
    "float": _FLOATS,
    "SymFloat": _FLOATS,
    "float[]": _m("as_float_lists"),
    "bool": _BOOLS,
    "SymBool": _BOOLS,
    "str": _m("as_strings"),
    "Scalar": _SCALARS,
    "Scalar?": _SCALARS,  # only lists without None: serialize_input refuses [1.0, None]
}
# Base schema type -> members that carry it as a return.
_RETURN_BASE: dict[str, frozenset[str]] = {
    "Tensor": _m("as_tensor", "as_none"),  # an undefined tensor is written as as_none
    "int": _m("as_sym_int", "as_int"),  # as_int: a constant AOTInductor specialized
    "SymInt": _m("as_sym_int", "as_int"),
    "float": _m("as_sym_float", "as_float"),
    "SymFloat": _m("as_sym_float", "as_float"),
    "bool": _m("as_sym_bool", "as_bool"),
    "SymBool": _m("as_sym_bool", "as_bool"),
    "Scalar": _m("as_sym_int", "as_int", "as_sym_float", "as_float", "as_sym_bool", "as_bool", "as_complex"),
    "complex": _m("as_complex"),
    "str": _m("as_string"),
    "ScalarType": _m("as_scalar_type"),
    "Layout": _m("as_layout"),
    "MemoryFormat": _m("as_memory_format"),
    "Device": _m("as_device"),
    "NoneType": _NONE,
}
_RETURN_LIST: dict[str, frozenset[str]] = {
    "Tensor": _m("as_tensors"),
    "Tensor?": _m("as_optional_tensors"),
    "int": _INTS,
    "SymInt": _INTS,
    "float": _m("as_floats", "as_sym_floats"),
    "bool": _m("as_bools", "as_sym_bools"),
    "str": _m("as_strings"),
}

_UNSUPPORTED_ARG = "serialize_input raises SerializeError 'Unsupported argument type' for a {what}"
_UNSUPPORTED_LIST = "serialize_input raises SerializeError 'Unsupported list/tuple argument type' for a list of {what}"
NOT_CARRIABLE: dict[str, str] = {
    "Generator": _UNSUPPORTED_ARG.format(what="torch.Generator (only `Generator?` passed None is carried, as_none)"),
    "Storage": _UNSUPPORTED_ARG.format(what="torch.UntypedStorage"),
    "Stream": _UNSUPPORTED_ARG.format(what="torch.Stream"),
    "QScheme": _UNSUPPORTED_ARG.format(what="torch.qscheme"),
    "PyObject": _UNSUPPORTED_ARG.format(what="plain Python object (registered opaque types have their own type name)"),
    "AnyClassType": "a TorchScript-only type: no exported graph passes an arbitrary class object",
    "AnyEnumType": "a TorchScript-only type: no exported graph passes a TorchScript enum",
    "type variable": "a TorchScript type variable (t, tVal, ...): the schema does not say what to convert to",
    "tuple": "a TorchScript tuple type: serialize_input turns tuples into lists and loses the element types",
    "Dict": "serialize_input raises SerializeError 'Dict keys must be strings' (only Dict(str, V) is carried)",
    "Future": "a TorchScript runtime object: no member and no serializer branch carries it",
    "Await": "a TorchScript runtime object: no member and no serializer branch carries it",
    "RRef": "a TorchScript runtime object: no member and no serializer branch carries it",
    "Union": "a TorchScript union: the schema does not say which member type to convert to",
    "list": _UNSUPPORTED_LIST.format(what="this element type (Device[], ScalarType[], complex[], ...)"),
    "return": "serialize_outputs/serialize_output raise SerializeError 'Unable to serialize output' for it",
}
"""Type families no `Argument` member can carry, with the export/serialization step that fails."""


_TYPE_VARIABLE = re.compile(r"^(t|tVal|tKey)\d*$")
_ROLE_FREE = frozenset({"type variable", "tuple", "Future", "Await", "RRef", "Union", "AnyClassType", "AnyEnumType"})


def _family(t: SchemaType) -> str:
    """The NOT_CARRIABLE key of an uncarriable type ("unknown" for a type the table does not know)."""
    if t.kind == "tuple":
        return "tuple"
    if t.kind == "generic":
        return t.name
    if t.kind == "list":
        return "list"
    if t.name in NOT_CARRIABLE:
        return t.name
    return "type variable" if _TYPE_VARIABLE.match(t.name) else "unknown"


def _as_type(t: SchemaType | str) -> SchemaType:
    return parse_type(t) if isinstance(t, str) else t


def _custom_class(t: SchemaType) -> bool:
    return t.kind == "base" and t.name.startswith("__torch__.torch.classes.")


def input_members(t: SchemaType | str) -> frozenset[str]:
    """The `Argument` members that can carry schema type `t` as an input (empty: not carriable)."""
    t = _as_type(t)
    if t.kind == "base":
        if _custom_class(t):
            return _m("as_custom_obj")
        return _INPUT_BASE.get(t.name, frozenset())
    if t.kind == "optional":
        inner = t.elem
        extra = _m("as_optional_tensor") if str(inner) == "Tensor" else frozenset()
        return input_members(inner) | extra | _NONE
    if t.kind == "list":
        return _INPUT_LIST.get(str(t.elem), frozenset())
    if t.kind == "generic" and t.name == "Dict" and str(t.args[0]) == "str" and input_members(t.args[1]):
        return _m("as_string_to_argument")
    return frozenset()


def return_members(t: SchemaType | str) -> frozenset[str]:
    """The `Argument` members that can carry schema type `t` as a return (empty: not carriable)."""
    t = _as_type(t)
    if t.kind == "base":
        if _custom_class(t):
            return _m("as_custom_obj")
        return _RETURN_BASE.get(t.name, frozenset())
    if t.kind == "optional":
        inner = t.elem
        extra = _m("as_optional_tensor") if str(inner) == "Tensor" else frozenset()
        return return_members(inner) | extra | _NONE if return_members(inner) else frozenset()
    if t.kind == "list":
        return _RETURN_LIST.get(str(t.elem), frozenset())
    return frozenset()


def why_not_carriable(t: SchemaType | str, role: str = "input") -> str | None:
    """None if some member carries `t` (role "input" or "return"), else the reason none can."""
    t = _as_type(t)
    members = input_members(t) if role == "input" else return_members(t)
    if members:
        return None
    inner = t
    while inner.kind == "optional":
        inner = inner.elem
    family = _family(inner)
    if family == "Dict" and role == "input" and str(inner.args[0]) == "str":
        return f"{t}: values of type {inner.args[1]} cannot be carried ({why_not_carriable(inner.args[1])})"
    if family not in _ROLE_FREE and role == "return":
        family = "return"
    elif inner.kind == "base" and inner.name in _INPUT_BASE:
        family = "list"
    return f"{t}: {NOT_CARRIABLE.get(family, 'not a schema type opwire knows; file an issue with the schema')}"
