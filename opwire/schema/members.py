"""What each member of the `Argument` and `Value` unions carries, read off the IDL: one table for all.

The recorder (Python value -> member), the executor's output check (kernel result -> named outputs),
AOTInductor's flattened convention (member -> array entries) and the Values converter all ask the
same question: *what kind of thing does this member hold?* The answer comes from the member's IDL
type, classified once here, so a member added to the IDL is classified (or refused at import) instead
of falling through a hand-written ladder:

- a struct or union named in `_STRUCT_KINDS` (TensorArgument -> "tensor", SymIntArgument ->
  "symbolic" of "int", ...), an enum named in `_ENUM_KINDS`, a primitive in `_PRIMITIVE_KINDS`;
- `list<T>` -> a "list" of T's carrier; `map<string, T>` -> a "map" of T's carrier;
- two members whose IDL type says less than their meaning: `as_none` (a bool flag) and `as_operator`
  (a string naming an op), in `_BY_NAME`.
"""

from __future__ import annotations

from dataclasses import dataclass

from opwire.schema.idl import TypeRef
from opwire.schema.models import SCHEMA

__all__ = ["ARGUMENT", "ENUM_OF", "VALUE", "Carrier", "carrier_of", "members_carrying"]


@dataclass(frozen=True)
class Carrier:
    """What a member holds: `kind` ("tensor", "int", "list", ...), and for lists, maps and symbolic values
    what they hold (`elem`: the list's element carrier, or the concrete kind a symbolic value stands for)."""

    kind: str
    elem: Carrier | None = None

    @property
    def spelled(self) -> str:
        """`list[int]`, `symbolic[int]`, `tensor`: for messages and tables."""
        return f"{self.kind}[{self.elem.spelled}]" if self.elem is not None else self.kind


_INT, _FLOAT, _BOOL = Carrier("int"), Carrier("float"), Carrier("bool")
_PRIMITIVE_KINDS = {"i64": _INT, "i32": _INT, "double": _FLOAT, "bool": _BOOL, "string": Carrier("string")}
_ENUM_KINDS = {"ScalarType": Carrier("dtype"), "Layout": Carrier("layout"), "MemoryFormat": Carrier("memory_format")}
ENUM_OF: dict[str, str] = {c.kind: enum for enum, c in _ENUM_KINDS.items()}
"""An enum carrier's kind -> the IDL enum it carries ("dtype" -> "ScalarType")."""
_STRUCT_KINDS = {
    "TensorArgument": Carrier("tensor"),
    "TensorValue": Carrier("tensor"),
    "OptionalTensorArgument": Carrier("optional_tensor"),
    "SymIntArgument": Carrier("symbolic", _INT),
    "SymFloatArgument": Carrier("symbolic", _FLOAT),
    "SymBoolArgument": Carrier("symbolic", _BOOL),
    "ComplexValue": Carrier("complex"),
    "Device": Carrier("device"),
    "GraphArgument": Carrier("graph"),
    "CustomObjArgument": Carrier("custom_obj"),
    "Argument": Carrier("argument"),
    "Value": Carrier("value"),
}
_BY_NAME = {"as_none": Carrier("none"), "as_operator": Carrier("operator")}


def _classify(ref: TypeRef, where: str) -> Carrier:
    if ref.kind in ("list", "set"):
        return Carrier("list", _classify(ref.args[0], f"{where}[]"))
    if ref.kind == "map":
        return Carrier("map", _classify(ref.args[1], f"{where}{{}}"))
    table = {"enum": _ENUM_KINDS, "struct": _STRUCT_KINDS}.get(ref.kind, _PRIMITIVE_KINDS)
    key = ref.name if ref.kind in ("enum", "struct") else ref.kind
    found = table.get(str(key))
    if found is None:
        raise AssertionError(
            f"schema/members.py does not classify {where}: {ref.spelled()}; add its kind to the tables there"
        )
    return found


def _union_table(union: str) -> dict[str, Carrier]:
    return {
        f.name: _BY_NAME.get(f.name) or _classify(f.type, f"{union}.{f.name}") for f in SCHEMA.structs[union].fields
    }


ARGUMENT: dict[str, Carrier] = _union_table("Argument")
"""Every `Argument` member -> what it carries (IDL order)."""
VALUE: dict[str, Carrier] = _union_table("Value")
"""Every `Value` member -> what it carries (IDL order)."""


def carrier_of(member: str, union: str = "Argument") -> Carrier:
    """What `member` of `union` ("Argument" or "Value") carries."""
    return (ARGUMENT if union == "Argument" else VALUE)[member]


def members_carrying(carrier: Carrier, union: str = "Argument") -> tuple[str, ...]:
    """The members of `union` that carry exactly `carrier`, in IDL order."""
    table = ARGUMENT if union == "Argument" else VALUE
    return tuple(name for name, c in table.items() if c == carrier)
