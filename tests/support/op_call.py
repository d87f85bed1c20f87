"""Serialized calls built from Python values: `call_node("aten::lstm.input", input=x, hx=[h, c], ...)`.

Tensors (and lists of tensors) become named tensor arguments whose values go into the returned environment;
ints, floats, bools and their lists become constants; the outputs follow the op's schema. For tests that
feed one op hostile companions through opwire's executor exactly as a file would.
"""

from __future__ import annotations

from typing import Any

import torch

from opwire.schema import models as m

__all__ = ["call_node"]


def _constant(v: Any) -> m.Argument:
    if v is None:
        return m.Argument(as_none=True)
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
        else:
            arg = _constant(v)
        inputs.append(m.NamedArgument(name=arg_name, arg=arg))
    outputs = []
    for i, r in enumerate(schema.returns):
        kind = str(r.type)
        if kind == "Tensor":
            outputs.append(m.Argument(as_tensor=m.TensorArgument(name=f"out{i}")))
        elif kind == "Tensor[]":
            outputs.append(m.Argument(as_tensors=[]))
        else:
            raise TypeError(f"{op}: return {i} of type {kind} is not built here")
    return m.Node(target=op, inputs=inputs, outputs=outputs, metadata={}), env
