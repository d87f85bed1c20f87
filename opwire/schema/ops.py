"""Operator schemas: torch `FunctionSchema` <-> `OpSchema` model <-> snapshot, and the one table of
which `Argument` members can carry each schema type (read by the executor, the recorder and the validator).

torch is imported lazily (inside functions), so `import opwire.schema` stays light.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from opwire.errors import OpValidationError
from opwire.schema import models as m
from opwire.schema._optype import ParsedArg, SchemaSyntaxError, SchemaType, parse_schema_text, parse_type
from opwire.schema.models import SCHEMA

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


@dataclass(frozen=True)
class OpArg:
    """One argument or return of an operator schema."""

    name: str
    type: str
    """The type as torch prints it in the schema string, alias annotations left out."""
    parsed: SchemaType
    default: Any = None
    """The default as torch reports it (enum defaults are c10 numbers, as in the schema string)."""
    has_default: bool = False
    default_str: str | None = None
    """The default as the schema string spells it."""
    kwarg_only: bool = False
    alias: str | None = None
    """The alias annotation such as "a!" (None when the argument does not alias)."""
    is_write: bool = False
    N: int | None = None
    """The fixed length of `int[N]`-style lists."""

    @property
    def is_optional(self) -> bool:
        """Whether the type is `T?`."""
        return self.parsed.kind == "optional"


@dataclass(frozen=True)
class OpSchema:
    """An operator schema: qualified name, overload, arguments and returns."""

    name: str
    """Qualified name "namespace::op"."""
    overload: str
    arguments: tuple[OpArg, ...]
    returns: tuple[OpArg, ...]
    is_mutable: bool
    schema: str
    """The full schema string as torch prints it."""
    is_vararg: bool = False
    is_varret: bool = False

    @property
    def qualname(self) -> str:
        """ "namespace::op.overload" (or "namespace::op" for the default overload)."""
        return f"{self.name}.{self.overload}" if self.overload else self.name

    @property
    def namespace(self) -> str:
        """The namespace part of the name."""
        return self.name.partition("::")[0]

    def argument(self, name: str) -> OpArg | None:
        """The argument called `name`, or None."""
        for a in self.arguments:
            if a.name == name:
                return a
        return None

    def to_snapshot(self, tags: tuple[str, ...] = ()) -> m.OpSchemaSnapshot:
        """This schema as the IDL's `OpSchemaSnapshot` record."""
        return m.OpSchemaSnapshot(
            name=self.name,
            overload=self.overload,
            schema_str=self.schema,
            arguments=[_arg_snapshot(a) for a in self.arguments],
            returns=[_arg_snapshot(a) for a in self.returns],
            tags=sorted(tags),
        )

    @staticmethod
    def from_snapshot(snapshot: m.OpSchemaSnapshot) -> OpSchema:
        """The schema a snapshot records (parsed from its schema string, checked against its fields)."""
        schema = parse_op_schema(snapshot.schema_str)
        mine = schema.to_snapshot(tuple(snapshot.tags))
        if mine != snapshot:
            raise OpValidationError(
                f"snapshot of {snapshot.name}.{snapshot.overload} contradicts its own schema string "
                f"{snapshot.schema_str!r}: expected {mine.model_dump()}, got {snapshot.model_dump()}; "
                "re-take the snapshot with `opwire ops snapshot`"
            )
        return schema


def _arg_snapshot(a: OpArg) -> m.OpArgumentSnapshot:
    return m.OpArgumentSnapshot(
        name=a.name, type=a.type, default_value=a.default_str, kwarg_only=a.kwarg_only, alias_info=a.alias
    )


def parse_op_schema(text: str) -> OpSchema:
    """Parse a schema string ("ns::op.overload(Tensor self, int n=2) -> Tensor") into an OpSchema."""
    import torch

    if not isinstance(text, str):
        raise OpValidationError(f"expected a schema string, got {type(text).__name__}")
    try:
        fs = torch._C.parse_schema(text)
    except (RuntimeError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise OpValidationError(
            f"not a valid operator schema {text!r}: torch says {first}; "
            "write it as 'ns::op.overload(Type name=default, ...) -> Type'"
        ) from None
    return _from_function_schema(fs)


def op_schema(op: Any) -> OpSchema:
    """The OpSchema of a live op: `torch.ops.ns.op.overload`, its `_schema`, or a schema string."""
    import torch

    if isinstance(op, str):
        return parse_op_schema(op)
    if isinstance(op, torch._C.FunctionSchema):
        return _from_function_schema(op)
    schema = getattr(op, "_schema", None)
    if isinstance(schema, torch._C.FunctionSchema):
        return _from_function_schema(schema)
    raise OpValidationError(
        f"expected an operator overload (torch.ops.ns.op.overload), a FunctionSchema or a schema string, "
        f"got {type(op).__name__}; pick an overload such as torch.ops.aten.add.Tensor"
    )


def _from_function_schema(fs: Any) -> OpSchema:
    """Build the model from torch's parse and opwire's own, which must agree on every name."""
    text = str(fs)
    try:
        parsed = parse_schema_text(text)
    except SchemaSyntaxError as exc:
        raise OpValidationError(f"cannot read the types of schema {text!r}: {exc}") from None
    if [a.name for a in parsed.arguments] != [a.name for a in fs.arguments] or len(parsed.returns) != len(fs.returns):
        raise OpValidationError(f"opwire's reading of schema {text!r} disagrees with torch's on the argument names")
    args = tuple(_op_arg(p, a) for p, a in zip(parsed.arguments, fs.arguments, strict=True))
    rets = tuple(_op_arg(p, a) for p, a in zip(parsed.returns, fs.returns, strict=True))
    return OpSchema(
        name=fs.name,
        overload=fs.overload_name,
        arguments=args,
        returns=rets,
        is_mutable=bool(fs.is_mutable),
        schema=text,
        is_vararg=parsed.is_vararg,
        is_varret=parsed.is_varret,
    )


def _op_arg(p: ParsedArg, a: Any) -> OpArg:
    has_default = bool(a.has_default_value())
    return OpArg(
        name=a.name,
        type=str(p.type),
        parsed=p.type,
        default=a.default_value if has_default else None,
        has_default=has_default,
        default_str=p.default,
        kwarg_only=bool(a.kwarg_only),
        alias=p.alias,
        is_write=bool(a.is_write),
        N=a.N,
    )
