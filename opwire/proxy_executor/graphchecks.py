"""Whole-graph checks made when a graph is bound, before any of its nodes runs.

- **Writes into inputs.** A node writes into a tensor through an argument the op schema marks `(a!)`
  (in-place ops, `out=` arguments, `resize_`, `set_`, `as_strided_`), directly or through a view.
  Which graph inputs a graph writes is known at bind time, and:
  - a **user input** it writes is run on a copy: the caller's tensor never changes (torch's training
    IR writes inputs in place; opwire's results are those of the functional program);
  - a **buffer** is the run's own copy already (`ProgramRunner` copies buffers; `run_program` runs on
    fresh copies), so training-IR in-place buffer updates (`num_batches_tracked.add_`) run as written;
  - a **parameter or constant** (shared by every run) may be written only when the signature declares
    it (`parameter_mutation`); otherwise a BindError, so later "fresh" runs stay fresh;
  - the **inputs of a subgraph** (a higher-order op's operands) may not be written at all.
- **Writes through undeclared aliases, or with no annotation at all.** This check follows alias annotations,
  which some ops lack (`_unsafe_view`, `unsafe_split`, `einsum` with an identity equation return views; batch
  norm writes its running stats unmarked). Those are found at run time by storage and bytes, in a checking pass
  per input layout (`write_check`).
- **Execution memory.** The program carries every node's output metadata: where all sizes are
  concrete, the bytes of the nodes' own outputs (views excluded) are summed and checked against
  `max_memory` (symbolic shapes are checked per node before allocation-heavy nodes run: `checks`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from opwire.errors import BindError, BudgetError
from opwire.proxy_executor.plan import NodePlan
from opwire.schema import models as m
from opwire.serde.tensors import element_size

__all__ = [
    "check_static_memory",
    "check_writes",
    "declared_writes",
    "protected_inputs",
    "written_inputs",
]


def _names(arg: m.Argument) -> Iterator[str]:
    """The tensor names an argument carries (as_tensor, as_tensors, optional tensors)."""
    kind, v = arg.type, arg.value
    if kind == "as_tensor":
        yield v.name
    elif kind == "as_tensors":
        yield from (t.name for t in v)
    elif kind == "as_optional_tensor" and v.type == "as_tensor":
        yield v.as_tensor.name
    elif kind == "as_optional_tensors":
        yield from (o.as_tensor.name for o in v if o.type == "as_tensor")


def protected_inputs(graph: m.Graph, signature: m.GraphSignature | None) -> dict[str, str]:
    """Graph input tensor name -> what it is ("user input 'x'", "parameter 'w'", ...)."""
    out: dict[str, str] = {}
    specs = signature.input_specs if signature is not None else []
    for i, arg in enumerate(graph.inputs):
        for name in _names(arg):
            label = f"input {i}"
            if i < len(specs):
                spec = specs[i]
                v = spec.value
                label = {
                    "user_input": f"user input {name!r}",
                    "parameter": f"parameter {getattr(v, 'parameter_name', name)!r}",
                    "buffer": f"buffer {getattr(v, 'buffer_name', name)!r}",
                    "tensor_constant": f"constant {getattr(v, 'tensor_constant_name', name)!r}",
                }.get(spec.type, f"{spec.type} {name!r}")
            out[name] = label
    return out


def declared_writes(graph: m.Graph, signature: m.GraphSignature) -> set[str]:
    """The graph input names whose mutation the signature's output specs declare."""
    by_target: dict[str, str] = {}
    for spec, arg in zip(signature.input_specs, graph.inputs, strict=False):
        v = spec.value
        for field in ("parameter_name", "buffer_name"):
            target = getattr(v, field, None)
            if target is not None:
                for name in _names(arg):
                    by_target[target] = name
        if spec.type == "user_input":
            for name in _names(arg):
                by_target[name] = name
    out: set[str] = set()
    for out_spec in signature.output_specs:
        v = out_spec.value
        target = {
            "buffer_mutation": "buffer_name",
            "parameter_mutation": "parameter_name",
            "user_input_mutation": "user_input_name",
        }.get(out_spec.type)
        if target is not None and getattr(v, target, None) in by_target:
            out.add(by_target[getattr(v, target)])
    return out


def written_inputs(plans: list[NodePlan], inputs: Mapping[str, str]) -> dict[str, str]:
    """Input name -> a sentence saying which node writes into it (directly or through a view), first write only."""
    root: dict[str, str] = {n: n for n in inputs}
    found: dict[str, str] = {}
    for p in plans:
        ins = {na.name: list(_names(na.arg)) for na in p.node.inputs}
        schema = p.target.schema
        if p.target.kind == "fixed":  # operator.getitem of a view list: still the same input
            sources = {root[n] for names in ins.values() for n in names if n in root}
            if len(sources) == 1:
                for out in p.node.outputs:
                    for name in _names(out):
                        root[name] = next(iter(sources))
            continue
        if schema is None:
            continue
        letters: dict[str, str] = {}
        for a in schema.arguments:
            names = [n for n in ins.get(a.name, []) if n in root]
            if a.alias is None or not names:
                continue
            letters[a.alias.rstrip("!")] = root[names[0]]
            if a.alias.endswith("!"):
                for n in names:
                    via = "" if n == root[n] else f" (through {n!r}, a view of it)"
                    found.setdefault(
                        root[n], f"{p.where} writes into {inputs[root[n]]}{via} through argument {a.name!r}"
                    )
        for r, out in zip(schema.returns, p.node.outputs, strict=False):
            letter = (r.alias or "").rstrip("!")
            if letter in letters:
                for name in _names(out):
                    root[name] = letters[letter]
    return found


def check_writes(
    plans: list[NodePlan], inputs: Mapping[str, str], allowed: set[str], copied: set[str] | None = None
) -> None:
    """BindError for a write into an input neither `allowed` nor run on a copy (`copied`: user inputs written)."""
    for name, what in written_inputs(plans, inputs).items():
        if name in allowed:
            continue
        if copied is not None and inputs[name].startswith("user input"):
            copied.add(name)  # the run writes into a copy: the caller's tensor never changes
            continue
        raise BindError(
            f"{what}, but the program's signature declares no mutation of it; a file cannot change the "
            "parameters and constants it was given, or the inputs of a subgraph (re-export the program so "
            "torch records the mutation)"
        )


def check_static_memory(graph: m.Graph, plans: list[NodePlan], budget: int) -> None:
    """BudgetError when the statically shaped outputs of the graph's nodes (views excluded) exceed `budget` bytes."""
    total, biggest = 0, ("", 0)
    for p in plans:
        schema = p.target.schema
        returns = schema.returns if schema is not None else ()
        for i, out in enumerate(p.node.outputs):
            if i < len(returns) and returns[i].alias is not None:
                continue  # a view: no storage of its own
            for name in _names(out):
                meta = graph.tensor_values.get(name)
                size = _static_bytes(meta, element_size) if meta is not None else None
                if size is not None:
                    total += size
                    biggest = max(biggest, (p.where, size), key=lambda e: e[1])
    if total > budget:
        raise BudgetError(
            f"the program's node outputs take {total:,} bytes by their recorded shapes (the largest: "
            f"{biggest[1]:,} bytes at {biggest[0]}), over the execution-memory budget of {budget:,} bytes; "
            "nothing ran; raise it with max_memory=BYTES (run_program, ProgramRunner)",
            "max_memory",
        )


def _static_bytes(meta: m.TensorMeta, element_size: Any) -> int | None:
    sizes = [s.as_int for s in meta.sizes if s.as_int is not None]
    strides = [s.as_int for s in meta.strides if s.as_int is not None]
    if len(sizes) != len(meta.sizes) or len(strides) != len(meta.strides):
        return None  # a symbolic size: checked per node when it runs
    if any(v == 0 for v in sizes):
        return 0
    try:
        item = element_size(meta.dtype)
    except Exception:  # an unknown dtype: its node reports it when it runs
        return None
    span = 1 + sum((s - 1) * abs(st) for s, st in zip(sizes, strides, strict=False))
    return int(span * item)
