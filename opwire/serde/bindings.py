"""Which weights and constants a program's signature binds (parameters, buffers, tensor constants)."""

from __future__ import annotations

from collections.abc import Container

from opwire.schema import models as m
from opwire.schema.spec_roles import spec_member, target_name

__all__ = ["bound_tensors", "first_missing", "parameter_names"]


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
