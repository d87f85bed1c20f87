"""`ProxyExecutor`: runs serialized operator calls (extern-kernel nodes, graph nodes) through torch's dispatcher.

Two conventions: `call(node, values)` binds by name and returns outputs by name; `call_function(node,
int_args, tensor_args)` is AOTInductor's flattened-array convention (seed 003), every count and index checked.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, MutableSequence, Sequence
from pathlib import Path
from typing import Any

from opwire import program
from opwire.errors import BindError
from opwire.proxy_executor.aoti import FlatPlan, build_flat
from opwire.proxy_executor.bound import run_plan
from opwire.proxy_executor.context import BindContext
from opwire.proxy_executor.default_policy import DefaultPolicy
from opwire.proxy_executor.exec_policy import ExecPolicy, refusals_collected
from opwire.proxy_executor.fast_calls import light
from opwire.proxy_executor.guard import RunGuard
from opwire.proxy_executor.plan import NodePlan, bind_node
from opwire.proxy_executor.run_budgets import MAX_MEMORY
from opwire.schema import models as m
from opwire.schema.edits import edit_count, snapshot, track, unchanged

__all__ = ["ProxyExecutor", "load_extern_nodes"]

# Plans of nodes passed to call(node). Graphs are bound by their runner (bound.BoundGraph), which the opened
# program owns (opwire.program.OpenedProgram.bound); a node handed to call() belongs to no opened program
# (the caller built it, or took it from anywhere), so this executor is the only owner its plan can have.
# Its staleness is judged by the same one mechanism as every bound graph's: opwire.schema.edits.
_AD_HOC_PLANS = 4096


def load_extern_nodes(path: str | Path, *, max_elements: int | None = None) -> m.ExternKernelNodes:
    """The extern-node JSON AOTInductor writes (`<hash>.wrapper.json`), or the one inside a `.pt2` package."""

    nodes: m.ExternKernelNodes = program.open(path, expect="extern_nodes", max_elements=max_elements)
    return nodes


def _bind(node: m.Node, where: str, policy: DefaultPolicy, ctx: BindContext) -> NodePlan:
    """`bind_node`, with an unguarded plan's op wrapped so its kernel warnings are collected (`fast_calls.light`)."""
    p = bind_node(node, where, policy, ctx)
    return p if p.guarded else light(p)


class ProxyExecutor:
    """Runs serialized calls; plans (resolved op, converters) are built once under a lock and reused.

    Ops outside the allowlist (`opwire.proxy_executor.exec_policy`) are BindErrors when a node is bound (the
    extern nodes of `nodes` at construction); `allow_ops=["aten::from_file", ...]` allows them. Each
    `call`/`call_function` of a seeded op, an `out=` variant or a torch op allowed by name runs inside a
    `guard.RunGuard` (grad mode, modes, flags and the RNG state put back; kernel warnings re-issued as
    OpwireWarning); allowlisted, unseeded torch ops and library ops change none of that and run under the light
    guard (`fast_calls`: a RunGuard costs more than a small kernel), which re-issues their kernel warnings too.
    """

    def __init__(
        self,
        nodes: m.ExternKernelNodes | str | Path | None = None,
        policy: DefaultPolicy | str = DefaultPolicy.FROM_SCHEMA,
        subgraph_runner: Callable[[m.GraphArgument], Any] | None = None,
        *,
        allow_ops: Iterable[str] = (),
        exec_policy: ExecPolicy | None = None,
        max_memory: int = MAX_MEMORY,
    ) -> None:
        self.policy = DefaultPolicy.parse(policy)
        self.exec_policy = exec_policy if exec_policy is not None else ExecPolicy(allow_ops, max_memory=max_memory)
        self._ctx = BindContext(subgraph_runner, self.exec_policy)
        self._lock = threading.Lock()
        self._plans: dict[int, tuple[m.Node, NodePlan, int, list[Any]]] = {}
        if nodes is not None and not isinstance(nodes, m.ExternKernelNodes):
            nodes = load_extern_nodes(nodes)
        self.nodes: m.ExternKernelNodes = nodes if nodes is not None else m.ExternKernelNodes(nodes=[])
        self._names: dict[str, int] = {}
        for i, ek in enumerate(self.nodes.nodes):
            if ek.name in self._names:
                raise BindError(f"extern node {i} repeats the name {ek.name!r} of node {self._names[ek.name]}")
            self._names[ek.name] = i
        self._extern: list[NodePlan] = []
        self._extern_snapshots: list[list[Any]] = []
        with refusals_collected():  # one BindError naming every refused op of the file
            for i, ek in enumerate(self.nodes.nodes):
                track(ek)
                self._extern.append(_bind(ek.node, f"extern node {i} {ek.name!r}", self.policy, self._ctx))
                self._extern_snapshots.append(snapshot(ek))
        self._flat: list[FlatPlan | None] = [None] * len(self._extern)
        # per extern node, the unguarded fast calls (None: take the general path): one list index per call
        self._quick: list[Callable[[Mapping[str, Any]], dict[str, Any]] | None] = [
            p.prepared() if not p.guarded else None for p in self._extern
        ]
        self._flat_quick: list[Callable[[Sequence[int], MutableSequence[Any]], list[Any] | None] | None] = [None] * len(
            self._extern
        )
        self._edits = edit_count()

    # ---- name-based convention -------------------------------------------------------------

    def plan(self, node: m.Node) -> NodePlan:
        """The bound plan of `node`: built on first use (under a lock), built again if the node was edited."""
        entry = self._plans.get(id(node))
        if entry is not None and entry[0] is node and entry[2] == edit_count():
            return entry[1]
        with self._lock:
            edits = edit_count()
            entry = self._plans.get(id(node))
            if entry is not None and entry[0] is node and unchanged(entry[3], node):
                self._plans[id(node)] = (node, entry[1], edits, entry[3])
                return entry[1]
            label = f"node {node.name!r}" if node.name else "node"
            track(node)
            built = _bind(node, label, self.policy, self._ctx)
            self._plans.pop(id(node), None)
            if len(self._plans) >= _AD_HOC_PLANS:
                del self._plans[next(iter(self._plans))]  # the oldest: a bounded table, never a wholesale clear
            self._plans[id(node)] = (node, built, edits, snapshot(node))
            return built

    def call(
        self, node: m.Node | int | str, values: Mapping[str, object], defaults: Mapping[str, object] | None = None
    ) -> dict[str, object]:
        """Run one node with inputs looked up by name; returns outputs keyed by their serialized names."""
        if defaults is None and type(node) is int and 0 <= node < len(self._quick) and self._edits == edit_count():
            quick = self._quick[node]
            if quick is not None:
                return quick(values)
        p = self._extern_plan(self._index(node)) if isinstance(node, (int, str)) else self.plan(node)
        if not p.guarded:
            return run_plan(p, values, defaults)
        with RunGuard(p.where, p.seeded) as guard:
            return guard.call(p.where, run_plan, p, values, defaults)

    # ---- AOTInductor's flattened convention -------------------------------------------------

    def call_function(self, node: int | str, int_args: Sequence[int], tensor_args: MutableSequence[Any]) -> list[Any]:
        """Run extern node `node` (index or name) the way AOTInductor's wrapper does; returns output tensors."""
        if type(node) is int and 0 <= node < len(self._flat) and self._edits == edit_count():
            quick = self._flat_quick[node]
            if quick is not None and type(tensor_args) is list and type(int_args) in (list, tuple):
                done = quick(int_args, tensor_args)  # None: a count or type the general path reports
                if done is not None:
                    return done
        flat = self._flat[node] if type(node) is int and 0 <= node < len(self._flat) else None
        if flat is None or self._edits != edit_count():
            flat = self._flat_plan(self._index(node))
        if not flat.plan.guarded:
            return flat.call(int_args, tensor_args)
        with RunGuard(flat.plan.where, flat.plan.seeded) as guard:
            return guard.call(flat.plan.where, flat.call, int_args, tensor_args)

    def layout(self, node: int | str) -> str:
        """What `call_function` expects for `node`: the int and tensor array entries, in order."""
        return self._flat_plan(self._index(node)).describe()

    def _flat_plan(self, index: int) -> FlatPlan:
        plan = self._extern_plan(index)
        flat = self._flat[index]
        if flat is None:
            with self._lock:
                flat = self._flat[index]
                if flat is None:
                    flat = self._flat[index] = build_flat(plan)
                    self._flat_quick[index] = flat.fast if not plan.guarded else None
        return flat

    def _extern_plan(self, index: int) -> NodePlan:
        """The plan of extern node `index`, bound again first if any extern node was edited in place."""
        if self._edits != edit_count():
            with self._lock:
                edits = edit_count()
                for i, ek in enumerate(self.nodes.nodes[: len(self._extern)]):
                    if not unchanged(self._extern_snapshots[i], ek):
                        track(ek)
                        self._extern[i] = _bind(ek.node, f"extern node {i} {ek.name!r}", self.policy, self._ctx)
                        self._extern_snapshots[i] = snapshot(ek)
                        self._flat[i] = self._flat_quick[i] = None
                        self._quick[i] = self._extern[i].prepared() if not self._extern[i].guarded else None
                self._edits = edits
        return self._extern[index]

    def _index(self, node: int | str) -> int:
        if isinstance(node, bool) or not isinstance(node, (int, str)):
            raise BindError(f"expected an extern node index or name, got {type(node).__name__}")
        if isinstance(node, str):
            if node not in self._names:
                raise BindError(f"no extern node named {node!r}; the file has {', '.join(self._names) or 'no nodes'}")
            return self._names[node]
        if not 0 <= node < len(self._extern):
            raise BindError(f"extern node index {node} is out of range: the file has {len(self._extern)} nodes")
        return node

    def __len__(self) -> int:
        """Number of extern nodes loaded."""
        return len(self._extern)

    def __bool__(self) -> bool:
        """Always true: an executor with no extern nodes still runs `call(node, ...)` (`len` is no truth test)."""
        return True
