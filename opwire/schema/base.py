"""Base classes and field types of the generated models (models.py imports these).

Structs ignore unknown keys (as torch does); unions forbid them and hold exactly one member.
Integers are range-checked, booleans and integers strict, non-finite doubles travel in JSON as the
strings torch writes ("Infinity", "-Infinity", "NaN"), binary travels in JSON as standard base64.

Built from Python, models take what a user types where it is unambiguous: an enum field its int value
(`kind=1`), a list field a tuple (`torch.Size` is one). JSON input keeps the strict schema unchanged, so
decoding pays nothing for this. A union prints only its member (`Argument(as_int=3)`), a struct leaves out
fields equal to their default, enums print as `ScalarType.FLOAT`: every repr is an expression that rebuilds
an equal model (with `nan` and `inf` named for non-finite doubles).
"""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Iterator, Mapping
from enum import IntEnum
from functools import cache
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Self, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    PlainSerializer,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
    model_validator,
)
from pydantic_core import CoreSchema
from pydantic_core import core_schema as cs

from opwire.schema.symexpr import check_expr

if TYPE_CHECKING:
    from opwire.schema.idl import Schema

__all__ = [
    "F64",
    "I8",
    "I16",
    "I32",
    "I64",
    "Binary",
    "EnumOf",
    "ListOf",
    "SymExprStr",
    "ThriftEnum",
    "ThriftStruct",
    "ThriftUnion",
    "assembled",
    "binary_out",
    "count_edit",
    "describe_fields",
    "edit_count",
    "float_out",
]

_NONFINITE_IN = {"Infinity": math.inf, "-Infinity": -math.inf, "NaN": math.nan}


def _float_in(value: Any) -> Any:
    """Accept torch's spelling of non-finite doubles; everything else goes to strict float."""
    if isinstance(value, str):
        if value in _NONFINITE_IN:
            return _NONFINITE_IN[value]
        raise ValueError(f'expected a number or "Infinity"/"-Infinity"/"NaN", got string {value!r}')
    return value


def float_out(value: float) -> float | str:
    """A double as torch's JSON writes it: itself when finite, else "Infinity", "-Infinity" or "NaN"."""
    if value - value == 0:  # finite (the fastest test: this runs for every double a program holds)
        return value
    if value != value:
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


def _binary_in(value: Any) -> Any:
    """Binary fields arrive in JSON as standard base64 strings."""
    if isinstance(value, str):
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ValueError(f"expected standard base64, got an invalid string ({exc})") from None
    return value


def binary_out(value: bytes) -> str:
    """Binary as torch's JSON encoder writes bytes: standard base64."""
    return base64.b64encode(value).decode("ascii")


def _int_range(bits: int) -> Any:
    return Field(ge=-(2 ** (bits - 1)), le=2 ** (bits - 1) - 1)


I8 = Annotated[int, _int_range(8)]
I16 = Annotated[int, _int_range(16)]
I32 = Annotated[int, _int_range(32)]
I64 = Annotated[int, _int_range(64)]
F64 = Annotated[float, BeforeValidator(_float_in), PlainSerializer(float_out, when_used="json")]
Binary = Annotated[bytes, BeforeValidator(_binary_in), PlainSerializer(binary_out, when_used="json")]
SymExprStr = Annotated[str, AfterValidator(check_expr)]
"""`SymExpr.expr_str`: only what opwire's strict expression grammar accepts (schema/symexpr.py)."""


class ThriftEnum(IntEnum):
    """An IDL enum: an IntEnum whose repr is the expression that names it (`ScalarType.FLOAT`)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}.{self.name}"


class _IntForEnum:
    """From Python, an enum field also takes the member's int value (never a bool, float or string).

    JSON keeps the strict enum schema: JSON has no enum type, so ints are what it carries already."""

    def __get_pydantic_core_schema__(self, source: type[IntEnum], handler: GetCoreSchemaHandler) -> CoreSchema:
        members = list(source)
        strict = cs.enum_schema(source, members, sub_type="int", strict=True)
        by_value = cs.chain_schema(
            [cs.int_schema(strict=True), cs.enum_schema(source, members, sub_type="int", strict=False)]
        )
        python = cs.union_schema(
            [strict, by_value],  # a member passes the first check: no cost for what the codecs build
            mode="left_to_right",
            custom_error_type="enum_int",
            custom_error_message=f"Input should be a {source.__name__} member or one of the ints "
            + ", ".join(str(int(e)) for e in members),
        )
        return cs.json_or_python_schema(json_schema=handler(source), python_schema=python)


class _AnySequence:
    """From Python, a list field also takes a tuple (so `torch.Size` and namedtuples), converted to a list.

    Strings, sets (no order), iterators (consumed once) and mappings stay refused. The check is by type, not
    `collections.abc.Sequence`: that ABC check would cost more than the list validation itself, and it lets
    in memoryview (bytes read as ints). JSON keeps the strict list schema."""

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        strict = handler(source)
        if strict["type"] != "list":
            raise TypeError(f"ListOf needs a list type, got {source!r}")
        sequence = cs.custom_error_schema(cs.is_instance_schema((list, tuple)), custom_error_type="list_type")
        lax = cs.list_schema(strict["items_schema"], strict=False)
        return cs.json_or_python_schema(json_schema=strict, python_schema=cs.chain_schema([sequence, lax]))


_E = TypeVar("_E", bound=IntEnum)
_T = TypeVar("_T")
EnumOf = Annotated[_E, _IntForEnum()]
"""An enum field: members, or their int values when built from Python."""
ListOf = Annotated[list[_T], _AnySequence()]
"""A list field: lists, or any non-string sequence when built from Python."""

# `defer_build`: a model's core schema, validator and serializer are built on its first validation or dump, not
# at import. The codecs build instances without them (the C builder, the Thrift readers), so `opwire inspect`
# builds two of ~113 and `import opwire.schema.models` costs a third of what building them all did.
_COMMON = ConfigDict(
    strict=True,
    revalidate_instances="never",
    validate_assignment=True,
    protected_namespaces=(),
    defer_build=True,
)


# Bumped by every attribute assignment on any model (and by edits of the lists `opwire.schema.edits.track`
# makes counted). Whatever caches work derived from models (the executor's bound plans) compares it to
# notice in-place edits at any depth without walking the models on every use.
_EDITS = [0]


def edit_count() -> int:
    """A number that changes whenever a model is edited in place (see `opwire.schema.edits`)."""
    return _EDITS[0]


def describe_fields(models: Mapping[str, type[BaseModel]], schema: Schema) -> None:
    """Give every field of `models` its IDL doc as its description (what `Field(description=...)` sets).

    The generated models carry the same text as attribute docstrings; pydantic's `use_attribute_docstrings`
    would read them back by parsing each class's source at import, a third of the time `import
    opwire.schema.models` takes (and of every command that reads a file), so they come from the IDL table.
    """
    for name, cls in models.items():
        docs = {f.name: f.doc for f in schema.structs[name].fields if f.doc}
        for field, info in cls.model_fields.items():
            if field in docs:
                info.description = docs[field]


def count_edit() -> None:
    """Record that some model changed in place."""
    _EDITS[0] += 1


@cache
def _defaults(cls: type[BaseModel]) -> dict[str, Any]:
    """The default value of every field of `cls` that has one (what a repr may leave out)."""
    return {
        name: info.get_default(call_default_factory=True)
        for name, info in cls.model_fields.items()
        if not info.is_required()
    }


_Model = TypeVar("_Model", bound=BaseModel)
_SLOTS = BaseModel.__dict__
_SET_DICT, _SET_FIELDS, _SET_EXTRA, _SET_PRIVATE = (
    _SLOTS[s].__set__ for s in ("__dict__", "__pydantic_fields_set__", "__pydantic_extra__", "__pydantic_private__")
)


@cache
def _layout(cls: type[BaseModel]) -> tuple[dict[str, Any], frozenset[str]]:
    """Every field of `cls` in order with its default (None for a required one), and the required fields."""
    if any(info.default_factory is not None for info in cls.model_fields.values()) or cls.__private_attributes__:
        raise TypeError(f"{cls.__name__} has default factories or private attributes: build it validated")
    return (
        {name: None if info.is_required() else info.default for name, info in cls.model_fields.items()},
        frozenset(name for name, info in cls.model_fields.items() if info.is_required()),
    )


def assembled(cls: type[_Model], fields: dict[str, Any]) -> _Model:
    """The `cls` model holding `fields` (the others at their defaults), as pydantic's validation builds it from
    the same values (`__dict__` in field order, the fields set, no extra, no private), without checking them.

    Only for values opwire made itself, each already of its field's exact type (a tensor's trace name, a model
    it built): the recorder builds a few of these per call, and validation re-walked them (~10% of its CPU)."""
    blank, required = _layout(cls)
    if not required <= fields.keys() or not fields.keys() <= blank.keys():
        raise TypeError(f"{cls.__name__}: fields {sorted(fields)} leave out a required one or name no field")
    obj = object.__new__(cls)
    values = dict(blank)
    values.update(fields)
    _SET_DICT(obj, values)
    _SET_FIELDS(obj, set(fields))
    _SET_EXTRA(obj, None)
    _SET_PRIVATE(obj, None)
    return obj


def _is_default(value: Any, default: Any) -> bool:
    return value is default or (type(value) is type(default) and value == default)


def _unknown_fields(cls: type[BaseModel], names: Mapping[str, Any]) -> ValidationError | None:
    """A ValidationError naming the keys of `names` that are no field of `cls`, or None."""
    unknown = [k for k in names if k not in cls.model_fields]
    if not unknown:
        return None
    return ValidationError.from_exception_data(
        cls.__name__, [{"type": "extra_forbidden", "loc": (k,), "input": names[k]} for k in unknown]
    )


class ThriftStruct(BaseModel):
    """A Thrift struct: every field written, unknown keys ignored."""

    model_config = ConfigDict(**_COMMON, extra="ignore")
    __thrift_kind__: ClassVar[str] = "struct"

    def __setattr__(self, name: str, value: Any) -> None:
        """Assign (validated) and count the edit (see `edit_count`)."""
        _EDITS[0] += 1
        super().__setattr__(name, value)

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        """Every field but those equal to their default: the repr still rebuilds an equal model."""
        defaults = _defaults(type(self))
        for k, v in self.__dict__.items():
            if k in defaults and _is_default(v, defaults[k]):
                continue
            yield k, v

    def replace(self, **changes: Any) -> Self:
        """A validated copy with `changes` applied; a name that is no field is refused."""
        unknown = _unknown_fields(type(self), changes)
        if unknown is not None:
            raise unknown
        return type(self)(**{**self.__dict__, **changes})


class ThriftUnion(BaseModel):
    """A Thrift union: exactly one member set; written as a single-key object."""

    model_config = ConfigDict(**_COMMON, extra="forbid")
    __thrift_kind__: ClassVar[str] = "union"

    def __setattr__(self, name: str, value: Any) -> None:
        """Assign (validated) and count the edit (see `edit_count`)."""
        _EDITS[0] += 1
        super().__setattr__(name, value)

    @model_validator(mode="after")
    def _exactly_one(self) -> ThriftUnion:
        """Reject zero or several members, naming the union and the members."""
        d = self.__dict__
        fields_set = self.__pydantic_fields_set__
        if len(fields_set) == 1:
            (k,) = fields_set
            if d[k] is not None:
                return self
        set_members = [k for k, v in d.items() if v is not None]
        if len(set_members) != 1:
            got = ", ".join(set_members) if set_members else "none"
            raise ValueError(
                f"union {type(self).__name__} needs exactly one member set, got {len(set_members)} ({got}); "
                f"members: {', '.join(type(self).model_fields)}"
            )
        return self

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        """Only the member that is set: `Argument(as_int=3)`."""
        for k, v in self.__dict__.items():
            if v is not None:
                yield k, v

    def replace(self, **member: Any) -> Self:
        """A new union holding exactly `member` (one keyword: `arg.replace(as_float=1.0)`), validated."""
        return type(self)(**member)

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """pydantic's copy; with `update`, the result is validated at once (one member, of its type).

        To switch member, use `replace`: an update that leaves two members set is a ValidationError."""
        copied = super().model_copy(update=update, deep=deep)
        if not update:
            return copied
        return type(self)(**{k: v for k, v in copied.__dict__.items() if v is not None})

    @model_serializer(mode="wrap")
    def _single_key(self, handler: SerializerFunctionWrapHandler) -> Any:
        """Write only the member that is set: {"as_int": 3}."""
        data = handler(self)
        return {k: v for k, v in data.items() if v is not None}

    @property
    def type(self) -> str:
        """Name of the member that is set."""
        for k, v in self.__dict__.items():
            if v is not None:
                return k
        raise AttributeError(f"{type(self).__name__} has no member set")

    @property
    def value(self) -> Any:
        """Value of the member that is set."""
        for v in self.__dict__.values():
            if v is not None:
                return v
        raise AttributeError(f"{type(self).__name__} has no member set")
