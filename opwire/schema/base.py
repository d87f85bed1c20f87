"""Base classes and field types of the generated models (models.py imports these).

Structs ignore unknown keys (as torch does); unions forbid them and hold exactly one member.
Integers are range-checked, booleans and integers strict, non-finite doubles travel in JSON as the
strings torch writes ("Infinity", "-Infinity", "NaN"), binary travels in JSON as standard base64.
"""

from __future__ import annotations

import base64
import binascii
import math
from typing import Annotated, Any, ClassVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from opwire.schema.symexpr import check_expr

__all__ = [
    "F64",
    "I8",
    "I16",
    "I32",
    "I64",
    "Binary",
    "SymExprStr",
    "ThriftStruct",
    "ThriftUnion",
    "binary_out",
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

_COMMON = ConfigDict(
    strict=True,
    revalidate_instances="never",
    validate_assignment=True,
    use_attribute_docstrings=True,
    protected_namespaces=(),
)


class ThriftStruct(BaseModel):
    """A Thrift struct: every field written, unknown keys ignored."""

    model_config = ConfigDict(**_COMMON, extra="ignore")
    __thrift_kind__: ClassVar[str] = "struct"


class ThriftUnion(BaseModel):
    """A Thrift union: exactly one member set; written as a single-key object."""

    model_config = ConfigDict(**_COMMON, extra="forbid")
    __thrift_kind__: ClassVar[str] = "union"

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
