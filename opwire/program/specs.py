"""The pytree specs of a program's top-level call, read by opwire's own parser and explained in one place."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch.utils._pytree import TreeSpec

from opwire.errors import DecodeError
from opwire.schema import models as m
from opwire.serde.pytree_spec import loads_spec

__all__ = ["pytree_specs", "unregistered_pytree_types"]


def pytree_specs(gm: m.GraphModule) -> tuple[TreeSpec | None, TreeSpec | None]:
    """(in_spec, out_spec) of the top-level call (None, None when the program has no module call graph).

    Whichever parser reads the spec strings, a failure is explained here: a class the spec names that no
    imported module registered is reported by name with the import that fixes it.
    """

    if not gm.module_call_graph or gm.module_call_graph[0].signature is None:
        return None, None
    sig = gm.module_call_graph[0].signature
    where = "graph_module.module_call_graph[0].signature"
    specs = []
    for field, text in (("in_spec", sig.in_spec), ("out_spec", sig.out_spec)):
        try:
            specs.append(loads_spec(text, f"{where}.{field}"))  # opwire's own reader: imports nothing
        except DecodeError:
            unknown = unregistered_pytree_types(text)
            if unknown:
                module = unknown[0].rpartition(".")[0] or unknown[0]
                raise DecodeError(
                    f"the program's {field} names the pytree class {unknown[0]!r}, which no imported module has "
                    f"registered; import the module that defines it first (opwire run --import {module}, or "
                    f"`import {module}` in Python) - at `{where}.{field}`",
                    f"{where}.{field}",
                ) from None
            raise
    return specs[0], specs[1]


def unregistered_pytree_types(spec: str) -> list[str]:
    """The class names a serialized pytree spec uses that are not registered with torch's pytree (in order)."""
    import torch.utils._pytree as pytree

    try:
        doc = json.loads(spec)
    except (ValueError, RecursionError, TypeError):
        return []
    known = pytree.SERIALIZED_TYPE_TO_PYTHON_TYPE
    out: list[str] = []
    stack = [doc]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(reversed(item))
        elif isinstance(item, dict):
            name = item.get("type")
            if isinstance(name, str) and name not in known and name not in out:
                out.append(name)
            stack.extend(reversed(list(item.values())))
    return out
