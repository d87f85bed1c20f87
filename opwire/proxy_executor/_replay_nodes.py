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

__all__ = ["NodeShape", "NodeShapes", "tensor_names"]

_SCALAR_OUT: dict[str, tuple[str, type[Any]]] = {
    "as_int": ("as_sym_int", m.SymIntArgument),
    "as_float": ("as_sym_float", m.SymFloatArgument),
    "as_bool": ("as_sym_bool", m.SymBoolArgument),
}


def tensor_names(arg: m.Argument) -> list[str]:
    """Every tensor name an argument carries, in order (None entries of optional lists left out)."""
    kind, v = arg.type, arg.value
    if kind == "as_tensor":
        return [v.name]
    if kind == "as_tensors":
        return [t.name for t in v]
    if kind == "as_optional_tensor":
        return [v.as_tensor.name] if v.type == "as_tensor" else []
    if kind == "as_optional_tensors":
        return [t.as_tensor.name for t in v if t.type == "as_tensor"]
    if kind == "as_nested_tensors":
        return [t.name for ts in v for t in ts]
    return []


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


def _renamed(arg: m.Argument, fresh: Callable[[], str]) -> m.Argument:
    kind, v = arg.type, arg.value

    def t(_: Any) -> m.TensorArgument:
        return m.TensorArgument(name=fresh())

    def opt(o: m.OptionalTensorArgument) -> m.OptionalTensorArgument:
        return m.OptionalTensorArgument(as_tensor=t(o)) if o.type == "as_tensor" else o

    if kind == "as_tensor":
        return m.Argument(as_tensor=t(v))
    if kind == "as_tensors":
        return m.Argument(as_tensors=[t(x) for x in v])
    if kind == "as_optional_tensor":
        return m.Argument(as_optional_tensor=opt(v))
    if kind == "as_optional_tensors":
        return m.Argument(as_optional_tensors=[opt(x) for x in v])
    if kind == "as_nested_tensors":
        return m.Argument(as_nested_tensors=[[t(x) for x in xs] for xs in v])
    return arg


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

    inputs = [m.NamedArgument(name=na.name, arg=_renamed(na.arg, fresh("i")), kind=na.kind) for na in rec.inputs]
    outputs, scalars = [], set()
    for j, arg in enumerate(rec.outputs):
        sym = _SCALAR_OUT.get(arg.type)
        if sym is None:
            outputs.append(_renamed(arg, fresh("o")))
        else:
            scalars.add(j)
            outputs.append(m.Argument(**{sym[0]: sym[1](as_name=f"#s{j}")}))
    node = m.Node(target=rec.target, inputs=inputs, outputs=outputs, metadata={}, name=rec.target)
    return NodeShape(node, frozenset(scalars))
