"""`ProgramRunner` / `run_program` with `isolate=True`: the program runs in a sandboxed child (`isolate`).

The child is a fork of the caller: the runner, its bound plans, its tensors and the inputs are already
there. It reports each top-level node before it runs (so a crash names it), runs the program, and sends
the user outputs and the buffers the program mutates back as the `values` member of the one `IsolatedResult`
record a child sends (`isolate_result`), which the parent reads with opwire's strict decoder and shapes with the
program's own output spec.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import torch
import torch.utils._pytree as pytree

from opwire.errors import KernelError, printable
from opwire.proxy_executor.isolate import Child, run_in_child
from opwire.proxy_executor.sandbox import Limits, default_max_memory
from opwire.schema import models as m
from opwire.serde.objects import from_python, to_python

__all__ = [
    "IsolatedRunner",
    "api_limits",
    "mutated_names",
    "node_label",
    "progress_observer",
    "run_isolated",
    "shape_outputs",
    "write_back",
]

Observer = Callable[[m.Node, Mapping[str, Any]], None]
Tables = dict[str, torch.Tensor]


class IsolatedRunner(Protocol):
    """What the isolated paths (here and `persistent`) need of a runner; `runner.ProgramRunner` offers it.

    The runner calls into this module and `persistent`; they see it only through this protocol, so neither
    imports the runner."""

    isolate: bool  # run each call in a sandboxed child (False in the child's own copy)
    observer: Observer | None
    graph: m.Graph
    signature: m.GraphSignature
    out_spec: pytree.TreeSpec | None
    state: Tables
    constants: Tables

    def run_with(self, state: Tables, constants: Tables, args: Sequence[Any], kwargs: Any) -> Any:
        """Run on `args`/`kwargs`, reading and updating the given parameter/buffer tables."""
        ...

    def fresh_tables(self) -> tuple[Tables, Tables]:
        """Fresh copies of the parameter/buffer tables."""
        ...


def api_limits(max_memory: int | None, timeout: float | None) -> Limits:
    """The Python API's child limits: one intra-op thread (the caller may have forked OpenMP's pool already)."""
    return Limits(
        max_memory=max_memory if max_memory is not None else default_max_memory(),
        cpu_seconds=None if timeout is None else timeout * max(1, os.cpu_count() or 1) + 5,
        timeout=timeout,
        threads=1,
    )


def node_label(node: m.Node, index: int) -> str:
    """`graph node 'mm' (aten::mm.default)`, escaped for one terminal line."""
    name = repr(node.name) if node.name else f"#{index}"
    return f"graph node {printable(name)} ({printable(str(node.target))})"


def progress_observer(graph: m.Graph, child: Child, inner: Observer | None) -> Observer:
    """An observer that tells `child` which top-level node runs next (and calls `inner` first)."""
    nodes = list(graph.nodes)
    index = {id(n): i for i, n in enumerate(nodes)}
    if nodes:
        child.at(node_label(nodes[0], 0))

    def observe(node: m.Node, outputs: Mapping[str, Any]) -> None:
        if inner is not None:
            inner(node, outputs)
        i = index.get(id(node), -1) + 1
        child.at(node_label(nodes[i], i) if 0 < i < len(nodes) else "the program's outputs")

    return observe


def mutated_names(runner: IsolatedRunner) -> list[str]:
    """Buffers (a graph may write them in place) and the parameters the program declares it mutates."""
    names = [s.value.buffer_name for s in runner.signature.input_specs if s.type == "buffer"]
    for spec in runner.signature.output_specs:
        if spec.type == "parameter_mutation":
            names.append(spec.value.parameter_name)
    return names


def run_isolated(
    runner: IsolatedRunner,
    state: dict[str, torch.Tensor],
    constants: dict[str, torch.Tensor],
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    limits: Limits,
) -> Any:
    """Run `runner` on the inputs in a sandboxed child; outputs (and mutated buffers, written back) as in-process."""
    mutated = mutated_names(runner)

    def work(child: Child) -> m.Values:
        runner.isolate = False  # this is the child's own copy of the runner
        runner.observer = progress_observer(runner.graph, child, runner.observer)
        child.ready()
        result = runner.run_with(state, constants, args, kwargs)
        values = {
            f"output[{i}]": from_python(_plain(v), f"output[{i}]") for i, v in enumerate(pytree.tree_leaves(result))
        }
        for name in mutated:
            table = state if name in state else constants
            if name in table:
                values[f"state[{name}]"] = from_python(_plain(table[name]), f"state {name!r}")
        return m.Values(values=values)

    record = run_in_child(work, limits).values()
    leaves, n = [], 0
    while f"output[{n}]" in record.values:
        leaves.append(to_python(record.values[f"output[{n}]"], None, f"output[{n}]"))
        n += 1
    for name in mutated:
        value = record.values.get(f"state[{name}]")
        if value is not None:
            write_back(state if name in state else constants, name, to_python(value, None, name))
    return shape_outputs(runner, leaves)


def shape_outputs(runner: IsolatedRunner, leaves: list[Any]) -> Any:
    """The output leaves shaped by the program's output spec."""
    if runner.out_spec is None:
        return leaves[0] if len(leaves) == 1 else tuple(leaves)
    if runner.out_spec.num_leaves != len(leaves):
        raise KernelError(
            f"the isolated child sent {len(leaves)} outputs but the program's output spec holds "
            f"{runner.out_spec.num_leaves}"
        )
    return pytree.tree_unflatten(leaves, runner.out_spec)


def _plain(v: Any) -> Any:
    return v.detach() if isinstance(v, torch.Tensor) else v


def write_back(table: dict[str, torch.Tensor], name: str, value: Any) -> None:
    """Put a mutated buffer the child sent back into `table` (in place when the shape is the same)."""
    old = table.get(name)
    if isinstance(old, torch.Tensor) and isinstance(value, torch.Tensor) and old.shape == value.shape:
        with torch.no_grad():
            old.copy_(value.to(old.device))
    else:
        table[name] = value
