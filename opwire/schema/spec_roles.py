"""What each member of the `InputSpec` and `OutputSpec` unions binds, read off the IDL: one table for all.

The graph runner (which value feeds an input, where an output is written back), the signature (what a program
takes and returns), the archive writers and readers (which tensors are weights and which are constants:
`bound_tensors`, `parameter_names`, `first_missing`) and the page all ask the same questions of a spec. The
structure comes from the IDL: the graph-side field (`arg`, or `name` for a constant input) and the module-side
name (the one `*_name` string field). What the member *means* (a user value, a weight, a constant, a write-back)
is the one fact the IDL cannot say; it is given once per member in `_ROLES`, and an IDL member missing there
fails at import with a message naming this file.
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass
from typing import Any, Literal

from opwire.schema import models as m
from opwire.schema.models import SCHEMA

__all__ = [
    "INPUT",
    "OUTPUT",
    "SpecMember",
    "bound_tensors",
    "first_missing",
    "graph_name",
    "parameter_names",
    "spec_member",
    "target_name",
]

Role = Literal[
    "user_input",  # a value the caller passes
    "parameter",  # a weight (state_dict)
    "buffer",  # a weight when persistent, else a constant
    "tensor_constant",  # a lifted tensor constant
    "custom_obj",  # a TorchBind object
    "token",  # an effect token
    "constant_input",  # an input the program was specialized to
    "user_output",  # a value returned to the caller
    "write_back",  # an output written back to a buffer, parameter or user input
    "gradient",  # a gradient output of a joint graph
]


@dataclass(frozen=True)
class SpecMember:
    """One member of InputSpec or OutputSpec: its role, the field naming its graph value, the field naming
    what it binds in the module (None when it binds nothing there), and what that target is."""

    member: str
    role: Role
    graph_field: str
    target_field: str | None
    target_kind: str | None  # "parameter", "buffer", "user input", "tensor constant", "custom object"

    @property
    def is_user(self) -> bool:
        """Whether the caller supplies (input) or receives (output) this value."""
        return self.role in ("user_input", "user_output")


# member -> (role, what its target names); the only hand-kept fact, checked against the IDL below
_ROLES: dict[str, dict[str, tuple[Role, str | None]]] = {
    "InputSpec": {
        "user_input": ("user_input", None),
        "parameter": ("parameter", "parameter"),
        "buffer": ("buffer", "buffer"),
        "tensor_constant": ("tensor_constant", "tensor constant"),
        "custom_obj": ("custom_obj", "custom object"),
        "token": ("token", None),
        "constant_input": ("constant_input", None),
    },
    "OutputSpec": {
        "user_output": ("user_output", None),
        "loss_output": ("user_output", None),
        "buffer_mutation": ("write_back", "buffer"),
        "parameter_mutation": ("write_back", "parameter"),
        "user_input_mutation": ("write_back", "user input"),
        "gradient_to_parameter": ("gradient", "parameter"),
        "gradient_to_user_input": ("gradient", "user input"),
        "token": ("token", None),
    },
}


def _member(union: str, member: str, struct: str) -> SpecMember:
    roles = _ROLES[union]
    if member not in roles:
        raise AssertionError(f"schema/spec_roles.py gives no role to {union}.{member}; add it to _ROLES there")
    fields = SCHEMA.structs[struct].fields
    graph = next((f.name for f in fields if f.name == "arg"), None) or next(f.name for f in fields if f.name == "name")
    names = [f.name for f in fields if f.name.endswith("_name") and f.type.kind == "string"]
    if len(names) > 1:
        raise AssertionError(
            f"{struct} has several *_name fields ({names}); schema/spec_roles.py cannot tell its target"
        )
    role, kind = roles[member]
    target = names[0] if names else None
    if (target is None) != (kind is None):
        raise AssertionError(
            f"schema/spec_roles.py: {union}.{member} target {target!r} disagrees with its role {kind!r}"
        )
    return SpecMember(member, role, graph, target, kind)


def _table(union: str) -> dict[str, SpecMember]:
    table = {f.name: _member(union, f.name, str(f.type.name)) for f in SCHEMA.structs[union].fields}
    stale = set(_ROLES[union]) - set(table)
    if stale:
        raise AssertionError(f"schema/spec_roles.py names {union} members the IDL lacks: {sorted(stale)}")
    return table


INPUT: dict[str, SpecMember] = _table("InputSpec")
"""Every `InputSpec` member -> what it binds (IDL order)."""
OUTPUT: dict[str, SpecMember] = _table("OutputSpec")
"""Every `OutputSpec` member -> what it binds (IDL order)."""


def spec_member(spec: Any) -> SpecMember:
    """The table entry of an InputSpec or OutputSpec instance."""
    return (INPUT if type(spec).__name__ == "InputSpec" else OUTPUT)[spec.type]


def graph_name(spec: Any) -> str | None:
    """The name of the graph value a spec binds (a tensor, symbol, object or token; None for a constant
    user input or output, which has no name)."""
    v = getattr(spec.value, spec_member(spec).graph_field)
    if isinstance(v, str):
        return v
    inner = v.value if hasattr(v, "type") and hasattr(v, "value") else v  # an Argument union: its member
    name = getattr(inner, "name", None)
    return name if isinstance(name, str) else None


def target_name(spec: Any) -> str | None:
    """What a spec binds in the module ("l.weight", a buffer, a user input's name), or None."""
    field = spec_member(spec).target_field
    return None if field is None else str(getattr(spec.value, field))


# ---------------------------------------------------------- what a program binds (weights, constants)
def bound_tensors(program: m.ExportedProgram) -> tuple[dict[str, str], dict[str, str]]:
    """(weights, constants): name -> what binds it ("parameter", "buffer", "tensor constant", "custom object").

    Weights are what torch keeps in `state_dict` (parameters and persistent buffers); constants are
    tensor constants, non-persistent buffers and custom objects (`ExportedProgram.constants`).
    """
    weights: dict[str, str] = {}
    constants: dict[str, str] = {}
    for spec in program.graph_module.signature.input_specs:
        entry, name = spec_member(spec), target_name(spec)
        if name is None or entry.target_kind is None:
            continue  # binds nothing of the module (a user input, a token, a specialized constant)
        weight = entry.role == "parameter" or (entry.role == "buffer" and spec.value.persistent)
        (weights if weight else constants)[name] = entry.target_kind
    return weights, constants


def parameter_names(program: m.ExportedProgram) -> set[str]:
    """The names of the parameters a program binds (torch keeps them apart from buffers in a .pt2)."""
    specs = program.graph_module.signature.input_specs
    return {str(target_name(s)) for s in specs if spec_member(s).role == "parameter"}


def first_missing(program: m.ExportedProgram, weights: Container[str], constants: Container[str]) -> str | None:
    """`"parameter 'l.weight'"` for the first bound tensor neither container holds, else None."""
    need_w, need_c = bound_tensors(program)
    for need, have in ((need_w, weights), (need_c, constants)):
        for name, what in need.items():
            if name not in have:
                return f"{what} {name!r}"
    return None
