"""Records as executor nodes, shared between records of the same shape so the executor binds each shape once.

A record's tensor names are replaced by placeholders (`#i<k>` for inputs, `#o<k>` for outputs) and its
constant scalar outputs by named sym values (`#s<j>`, so the replay compares them with tolerance instead
of the executor refusing a different constant). Two records with the same target, constants and tensor
layout map to one node, and so to one bound plan.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from opwire.schema import models as m
from opwire.schema.refs import rename_tensors

__all__ = ["NodeShape", "NodeShapes"]

_SCALAR_OUT: dict[str, tuple[str, type[Any]]] = {
    "as_int": ("as_sym_int", m.SymIntArgument),
    "as_float": ("as_sym_float", m.SymFloatArgument),
    "as_bool": ("as_sym_bool", m.SymBoolArgument),
}


def _layout(arg: m.Argument) -> Any:
    """What identifies an argument up to tensor names."""
    kind, v = arg.type, arg.value
    if kind == "as_tensor":
        return kind
    if kind == "as_tensors":
        return kind, len(v)
    if kind == "as_optional_tensor":
        return kind, v.type
    if kind == "as_optional_tensors":
        return kind, tuple(t.type for t in v)
    if kind == "as_nested_tensors":
        return kind, tuple(len(ts) for ts in v)
    return kind, repr(v)


@dataclass(frozen=True)
class NodeShape:
    """A node with placeholder names, and which outputs are constant scalars (compared by the replay)."""

    node: m.Node
    scalar_outputs: frozenset[int]


class NodeShapes:
    """Cache of placeholder nodes by record shape."""

    def __init__(self) -> None:
        self._cache: dict[Any, NodeShape] = {}

    def get(self, rec: m.CallRecord) -> NodeShape:
        """The shared node of `rec`'s shape (built on first use)."""
        key = (
            rec.target,
            tuple((na.name, _layout(na.arg)) for na in rec.inputs),
            tuple(_layout(a) if a.type not in _SCALAR_OUT else a.type for a in rec.outputs),
        )
        hit = self._cache.get(key)
        if hit is None:
            hit = self._cache[key] = _build(rec)
        return hit


def _build(rec: m.CallRecord) -> NodeShape:
    counter = {"i": 0, "o": 0}

    def fresh(prefix: str) -> Callable[[], str]:
        def make() -> str:
            counter[prefix] += 1
            return f"#{prefix}{counter[prefix] - 1}"

        return make

    new_input = fresh("i")
    inputs = [
        m.NamedArgument(name=na.name, arg=rename_tensors(na.arg, lambda _: new_input()), kind=na.kind)
        for na in rec.inputs
    ]
    new_output = fresh("o")
    outputs, scalars = [], set()
    for j, arg in enumerate(rec.outputs):
        sym = _SCALAR_OUT.get(arg.type)
        if sym is None:
            outputs.append(rename_tensors(arg, lambda _: new_output()))
        else:
            scalars.add(j)
            outputs.append(m.Argument(**{sym[0]: sym[1](as_name=f"#s{j}")}))
    node = m.Node(target=rec.target, inputs=inputs, outputs=outputs, metadata={}, name=rec.target)
    return NodeShape(node, frozenset(scalars))
