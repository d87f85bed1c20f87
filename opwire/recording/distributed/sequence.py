"""Each rank's collectives, read one record at a time: group, op, arguments, input and result tensor names."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from opwire.recording.collectives import Collective, Kind, collective_of
from opwire.recording.mutations import written_arguments
from opwire.recording.source import TraceSource
from opwire.schema import models as m
from opwire.schema.refs import tensor_names

__all__ = ["CollectiveCall", "Names", "collective_calls", "signature"]

Names = list[Any]
"""Tensor names shaped as the argument holds them: [name] for a tensor, [n1, n2] for a list, [[...], ...] nested."""


@dataclass
class CollectiveCall:
    """One collective (or point-to-point call) of one rank."""

    rank: int
    index: int  # call index in the rank's trace
    target: str
    spec: Collective
    group: str
    args: dict[str, m.Argument]
    inputs: Names
    outputs: Names
    source: str
    module: str
    values: dict[str, Any] = field(default_factory=dict)  # scalars kept where `args` is not (a gathered summary)

    def scalar(self, name: str) -> Any:
        """The value of a non-tensor argument (an int, a string, a custom object's name), None when absent."""
        if name in self.values:
            return self.values[name]
        arg = self.args.get(name)
        if arg is None:
            return None
        if arg.type == "as_custom_obj":
            return arg.value.name
        return arg.value


def _shaped(arg: m.Argument) -> Names:
    if arg.type == "as_tensor":
        return [arg.value.name]
    if arg.type == "as_nested_tensors":
        return [[t.name for t in row] for row in arg.value]
    return tensor_names(arg)


def _refill(shape: Names, flat: list[str]) -> Names:
    it = iter(flat)
    return [[next(it) for _ in x] if isinstance(x, list) else next(it) for x in shape]


def _group(rec: m.CallRecord, spec: Collective, args: dict[str, m.Argument], default: str) -> str:
    arg = args.get(spec.group)
    if arg is None:
        return default
    if arg.type == "as_custom_obj":
        return str(arg.value.name)
    return str(arg.value)


def collective_calls(src: TraceSource, rank: int, group: str | None = None) -> Iterator[CollectiveCall]:
    """The collectives and point-to-point calls of `src` in call order (only those of `group` when given)."""
    for i in range(len(src)):
        spec = collective_of(src.target(i))  # the record itself is decoded only for a collective
        if spec is None or spec.kind == "wait":
            continue
        rec = src.record(i)
        if "skipped" in rec.metadata:
            continue
        args = {na.name: na.arg for na in rec.inputs}
        g = _group(rec, spec, args, "0")
        if group is not None and g != group:
            continue
        inputs = _shaped(args[spec.inputs]) if spec.inputs in args else []
        if spec.outputs == "return":
            outputs = _shaped(rec.outputs[0]) if rec.outputs else []
        elif spec.outputs:
            mutated = written_arguments(rec, f"call {rec.target}").get(spec.outputs, [])
            outputs = _refill(_shaped(args[spec.outputs]), mutated) if spec.outputs in args else []
        else:
            outputs = []
        source, module = rec.metadata.get("source", ""), rec.metadata.get("module", "")
        yield CollectiveCall(rank, i, rec.target, spec, g, args, inputs, outputs, source, module)


def _layout(src: TraceSource, names: Names) -> str:
    parts = []
    for n in names:
        if isinstance(n, list):
            parts.append(_layout(src, n))
            continue
        meta = src.meta(n)
        if meta is None:
            parts.append("?")
            continue
        dtype = m.ScalarType(meta.dtype).name.lower() if meta.dtype in m.ScalarType._value2member_map_ else "?"
        parts.append(f"{dtype}{list(meta.sizes)}")
    return "[" + ", ".join(parts) + "]"


_SAME_INPUTS: tuple[Kind, ...] = (
    "all_reduce", "all_gather", "cat", "reduce_scatter", "reduce_scatter_cat", "reduce", "all_to_all",
)  # fmt: skip
"""Kinds whose members must pass inputs of one layout."""
_SAME_OUTPUTS: tuple[Kind, ...] = ("broadcast", "all_reduce", "cat", "all_gather")
"""Kinds whose members must receive outputs of one layout."""


def signature(call: CollectiveCall, src: TraceSource) -> str:
    """What every member rank must agree on at this place of the group's sequence: op, reduction, root, layouts."""
    op = call.target
    extra = [f"{k}={call.scalar(k)}" for k in (call.spec.reduce, call.spec.root) if k]
    if call.spec.kind in _SAME_INPUTS:
        extra.append(f"inputs {_layout(src, call.inputs)}")
    if call.spec.kind in _SAME_OUTPUTS:
        extra.append(f"outputs {_layout(src, call.outputs)}")
    return f"{op}({', '.join(extra)})"
