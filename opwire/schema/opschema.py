"""Operator schemas as models: torch `FunctionSchema` (live op or schema string) <-> `OpSchema` <-> snapshot.

torch is imported lazily (inside functions), so `import opwire.schema` stays light. opwire's own
parse of the schema text (`_optype`) gives exact type spellings and alias annotations; torch's parse
gives defaults and flags; the two must agree on every name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from opwire.errors import OpValidationError, first_line
from opwire.schema import models as m
from opwire.schema._optype import ParsedArg, SchemaSyntaxError, SchemaType, parse_schema_text

__all__ = ["OpArg", "OpSchema", "op_schema", "parse_op_schema"]


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
        raise OpValidationError(
            f"not a valid operator schema {text!r}: torch says {first_line(exc)}; "
            "write it as 'ns::op.overload(Type name=default, ...) -> Type'"
        ) from None
    return _build(fs, str(fs))  # text from a file: not kept, so no file can grow the cache of live schemas


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


_BUILT: dict[str, OpSchema] = {}
"""Schema text of a registered op -> its OpSchema (frozen): read once per process, not once per node. Only
live ops' schemas are kept (bounded by what is registered); text read from a file is never cached."""


def _from_function_schema(fs: Any) -> OpSchema:
    """Build the model from torch's parse and opwire's own, which must agree on every name."""
    text = str(fs)
    built = _BUILT.get(text)
    if built is None:
        built = _BUILT.setdefault(text, _build(fs, text))
    return built


def _build(fs: Any, text: str) -> OpSchema:
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
