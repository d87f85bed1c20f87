"""Serialized calls built from Python values: `call_node("aten::lstm.input", input=x, hx=[h, c], ...)`.

Tensors (and lists of tensors) become named tensor arguments whose values go into the returned environment;
ints, floats, bools and their lists become constants; a list of tensors and Nones is a `Tensor?[]`; the outputs
follow the op's schema (tensors, lists, symbolic ints, floats and bools by name). For tests that
feed one op hostile companions through opwire's executor exactly as a file would.
"""

from __future__ import annotations

from typing import Any

import torch

from opwire.schema import models as m
from opwire.serde import torch_enums

__all__ = ["call_node"]


def _constant(v: Any) -> m.Argument:
    if v is None:
        return m.Argument(as_none=True)
    for enum, member in _ENUMS:  # a dtype, layout or memory format: the export schema's number for it
        found = torch_enums.from_torch(enum).get(v) if isinstance(v, _ENUM_TYPES[enum]) else None
        if found is not None:
            return m.Argument(**{member: int(found)})
    if isinstance(v, torch.device):
        return m.Argument(as_device=m.Device(type=v.type, index=v.index))
    if isinstance(v, bool):
        return m.Argument(as_bool=v)
    if isinstance(v, int):
        return m.Argument(as_int=v)
    if isinstance(v, float):
        return m.Argument(as_float=v)
    if isinstance(v, str):
        return m.Argument(as_string=v)
    if isinstance(v, (list, tuple)) and all(isinstance(e, bool) for e in v) and v:
        return m.Argument(as_bools=list(v))
    if isinstance(v, (list, tuple)) and all(isinstance(e, int) for e in v):
        return m.Argument(as_ints=list(v))
    if isinstance(v, (list, tuple)) and all(isinstance(e, float) for e in v):
        return m.Argument(as_floats=list(v))
    raise TypeError(f"no constant member for {v!r}")


_ENUMS = (("ScalarType", "as_scalar_type"), ("Layout", "as_layout"), ("MemoryFormat", "as_memory_format"))
_ENUM_TYPES = {"ScalarType": torch.dtype, "Layout": torch.layout, "MemoryFormat": torch.memory_format}


def call_node(op: str, **values: Any) -> tuple[m.Node, dict[str, Any]]:
    """A node calling `op` ("aten::x.overload") with `values` by argument name, and the environment it reads."""
    ns, _, rest = op.partition("::")
    name, _, overload = rest.partition(".")
    schema = getattr(getattr(getattr(torch.ops, ns), name), overload or "default")._schema
    env: dict[str, Any] = {}
    inputs = []
    for arg_name, v in values.items():
        if isinstance(v, torch.Tensor):
            env[arg_name] = v
            arg = m.Argument(as_tensor=m.TensorArgument(name=arg_name))
        elif isinstance(v, (list, tuple)) and v and all(isinstance(e, torch.Tensor) for e in v):
            names = [f"{arg_name}{i}" for i in range(len(v))]
            env.update(zip(names, v, strict=True))
            arg = m.Argument(as_tensors=[m.TensorArgument(name=n) for n in names])
        elif isinstance(v, (list, tuple)) and v and all(e is None or isinstance(e, torch.Tensor) for e in v):
            opt = []  # Tensor?[]: index_put's and index's indices
            for i, e in enumerate(v):
                if e is not None:
                    env[f"{arg_name}{i}"] = e
                opt.append(
                    m.OptionalTensorArgument(as_none=True)
                    if e is None
                    else m.OptionalTensorArgument(as_tensor=m.TensorArgument(name=f"{arg_name}{i}"))
                )
            arg = m.Argument(as_optional_tensors=opt)
        else:
            arg = _constant(v)
        inputs.append(m.NamedArgument(name=arg_name, arg=arg))
    outputs = [_output(op, i, str(r.type)) for i, r in enumerate(schema.returns)]
    return m.Node(target=op, inputs=inputs, outputs=outputs, metadata={}), env


_SYMBOLIC = {
    "int": lambda n: m.Argument(as_sym_int=m.SymIntArgument(as_name=n)),
    "SymInt": lambda n: m.Argument(as_sym_int=m.SymIntArgument(as_name=n)),
    "float": lambda n: m.Argument(as_sym_float=m.SymFloatArgument(as_name=n)),
    "bool": lambda n: m.Argument(as_sym_bool=m.SymBoolArgument(as_name=n)),
}


def _output(op: str, i: int, kind: str) -> m.Argument:
    """The serialized output `i` of a return of schema type `kind`."""
    if kind in ("Tensor", "Tensor?", "Optional[Tensor]"):
        return m.Argument(as_tensor=m.TensorArgument(name=f"out{i}"))
    if kind in ("Tensor[]", "List[Tensor]"):
        return m.Argument(as_tensors=[])
    if kind in _SYMBOLIC:
        return _SYMBOLIC[kind](f"out{i}")
    if kind == "Scalar":
        return m.Argument(as_float=0.0)
    raise TypeError(f"{op}: return {i} of type {kind} is not built here")
