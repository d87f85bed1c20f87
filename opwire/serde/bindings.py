"""Which weights and constants a program's signature binds (parameters, buffers, tensor constants)."""

from __future__ import annotations

from collections.abc import Container

from opwire.schema import models as m

__all__ = ["bound_tensors", "first_missing"]


def bound_tensors(program: m.ExportedProgram) -> tuple[dict[str, str], dict[str, str]]:
    """(weights, constants): name -> what binds it ("parameter", "buffer", "tensor constant", "custom object").

    Weights are what torch keeps in `state_dict` (parameters and persistent buffers); constants are
    tensor constants, non-persistent buffers and custom objects (`ExportedProgram.constants`).
    """
    weights: dict[str, str] = {}
    constants: dict[str, str] = {}
    for spec in program.graph_module.signature.input_specs:
        if spec.parameter is not None:
            weights[spec.parameter.parameter_name] = "parameter"
        elif spec.buffer is not None:
            table = weights if spec.buffer.persistent else constants
            table[spec.buffer.buffer_name] = "buffer"
        elif spec.tensor_constant is not None:
            constants[spec.tensor_constant.tensor_constant_name] = "tensor constant"
        elif spec.custom_obj is not None:
            constants[spec.custom_obj.custom_obj_name] = "custom object"
    return weights, constants


def first_missing(program: m.ExportedProgram, weights: Container[str], constants: Container[str]) -> str | None:
    """`"parameter 'l.weight'"` for the first bound tensor neither container holds, else None."""
    need_w, need_c = bound_tensors(program)
    for need, have in ((need_w, weights), (need_c, constants)):
        for name, what in need.items():
            if name not in have:
                return f"{what} {name!r}"
    return None
