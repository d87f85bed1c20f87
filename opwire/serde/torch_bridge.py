"""torch.export.ExportedProgram <-> opwire models, through torch's own serializer and deserializer.

`from_exported_program` returns the program model (the JSON torch writes, validated);
`archive_from_exported_program` adds the weights, constants and example inputs as TensorValues;
`to_exported_program` rebuilds a runnable ExportedProgram from an archive, or from a program plus
the tensors it binds.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import torch

from opwire._version import __version__
from opwire.errors import DecodeError, EncodeError
from opwire.schema import models as m
from opwire.schema.spec_roles import first_missing, parameter_names
from opwire.schema.symexpr import check_expr
from opwire.serde import json, objects, tensors
from opwire.serde.pytree_spec import loads_spec, program_specs

__all__ = ["archive_from_exported_program", "from_exported_program", "to_exported_program"]


def _check_ep(ep: Any) -> None:
    if not isinstance(ep, torch.export.ExportedProgram):
        raise EncodeError(f"Expected a torch.export.ExportedProgram, got {type(ep).__name__}")


def from_exported_program(ep: torch.export.ExportedProgram) -> m.ExportedProgram:
    """The opwire model of `ep`'s program (no weights), via torch's serializer."""
    from torch._export.serde.serialize import serialize

    _check_ep(ep)
    try:
        artifact = serialize(ep, serialize_state_dict=False, serialize_constants=False, serialize_example_inputs=False)
    except Exception as exc:  # torch raises SerializeError, AssertionError, ...
        raise EncodeError(f"torch could not serialize the program: {type(exc).__name__}: {exc}") from None
    return json.decode(artifact.exported_program, m.ExportedProgram, source="torch serializer output")


def archive_from_exported_program(ep: torch.export.ExportedProgram) -> m.OpwireArchive:
    """The program plus its weights, tensor constants and example inputs: a pickle-free archive."""
    program = from_exported_program(ep)
    weights = {k: tensors.from_tensor(v, f"state_dict[{k!r}]") for k, v in ep.state_dict.items()}
    constants = {}
    for k, v in ep.constants.items():
        if not isinstance(v, torch.Tensor):
            raise EncodeError(
                f"Expected tensor constants only, got {type(v).__name__} - at `constants[{k!r}]`; "
                f"an OpwireArchive cannot hold custom objects"
            )
        constants[k] = tensors.from_tensor(v, f"constants[{k!r}]")
    args: list[m.Value] | None = None
    kwargs: dict[str, m.Value] | None = None
    if ep.example_inputs is not None:
        args, kwargs = objects.inputs_from_python(*ep.example_inputs)
    return m.OpwireArchive(
        program=program,
        weights=weights,
        constants=constants,
        example_args=args,
        example_kwargs=kwargs,
        opwire_version=__version__,
    )


def _tensors_of(
    table: Mapping[str, m.TensorValue | torch.Tensor], kind: str, params: set[str], device: str | torch.device | None
) -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = {}
    for name, value in table.items():
        t = value if isinstance(value, torch.Tensor) else tensors.to_tensor(value, device, f"{kind}[{name!r}]")
        if name in params and not isinstance(t, torch.nn.Parameter):
            t = torch.nn.Parameter(t.detach(), requires_grad=t.requires_grad)
        out[name] = t
    return out


_EXPR = re.compile(rb'"expr_str": ("(?:[^"\\]|\\.)*")')


def _check_evaluated_strings(program: m.ExportedProgram, program_json: bytes) -> None:
    """Run opwire's own parsers over what torch's deserializer would eval or import, before it sees any.

    Decoding already checked every `expr_str` (a model built with `model_construct` skips that, so they
    are checked again here, from the JSON torch will read); every pytree spec is parsed by opwire's
    reader, which accepts only registered types, so torch's `treespec_loads` then imports nothing."""
    import json as _stdlib_json

    for i, raw in enumerate(_EXPR.findall(program_json)):
        try:
            check_expr(_stdlib_json.loads(raw))
        except ValueError as exc:
            raise DecodeError(f"{exc} - at expression {i} of the program", "expr_str") from None
    for spec, where in program_specs(program):
        loads_spec(spec, where)


def to_exported_program(
    archive_or_program: m.OpwireArchive | m.ExportedProgram,
    *,
    state_dict: Mapping[str, m.TensorValue | torch.Tensor] | None = None,
    constants: Mapping[str, m.TensorValue | torch.Tensor] | None = None,
    example_inputs: tuple[tuple[Any, ...], dict[str, Any]] | None = None,
    device: str | torch.device | None = None,
    expected_opset_version: dict[str, int] | None = None,
) -> torch.export.ExportedProgram:
    """A runnable torch ExportedProgram from an OpwireArchive, or from a program plus its tensors."""
    from torch._export.serde import schema as torch_schema
    from torch._export.serde.serialize import ExportedProgramDeserializer, _bytes_to_dataclass

    if isinstance(archive_or_program, m.OpwireArchive):
        program = archive_or_program.program
        sd_in: Mapping[str, Any] = {**archive_or_program.weights, **(state_dict or {})}
        c_in: Mapping[str, Any] = {**archive_or_program.constants, **(constants or {})}
        if example_inputs is None:
            example_inputs = objects.inputs_to_python(
                archive_or_program.example_args, archive_or_program.example_kwargs, device
            )
    elif isinstance(archive_or_program, m.ExportedProgram):
        program, sd_in, c_in = archive_or_program, state_dict or {}, constants or {}
    else:
        raise DecodeError(
            f"Expected an OpwireArchive or ExportedProgram model, got {type(archive_or_program).__name__}"
        )
    missing = first_missing(program, sd_in, c_in)
    if missing is not None:
        raise DecodeError(
            f"the program binds {missing} but no tensor was given for it; pass an OpwireArchive "
            f"(opwire.serde.pt2.read) or state_dict=/constants=",
            "graph_module.signature.input_specs",
        )
    program_json = json.encode(program)
    _check_evaluated_strings(program, program_json)
    params = parameter_names(program)
    sd = _tensors_of(sd_in, "weights", params, device)
    consts = _tensors_of(c_in, "constants", set(), device)
    try:
        torch_program = _bytes_to_dataclass(torch_schema.ExportedProgram, program_json)
        return ExportedProgramDeserializer(expected_opset_version).deserialize(
            torch_program, sd, consts, example_inputs
        )
    except Exception as exc:  # torch's deserializer raises many unrelated types on bad programs
        raise DecodeError(
            f"torch could not rebuild the program: {type(exc).__name__}: {exc}; check that every operator it "
            f"calls is loaded (custom ops need their library imported) and that the weights match",
        ) from None
