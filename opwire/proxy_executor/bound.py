"""A graph bound once into a list of node plans, and kept honest about in-place edits.

Binding a node (resolving its op, building converters) costs ~100 us; running it a few. So a graph is
bound once and its plans reused on every run. A model can be edited after binding, though, and running
the old plan would silently compute the unedited program. Binding therefore makes the graph's lists
counted (`opwire.schema.edits.track`) and records the identity of everything inside each node; before a
run, one integer comparison (`edit_count()`) says whether any model changed since. When one did, each
node is compared with its snapshot, and the edited ones (and new ones) are bound again before the graph
runs: an edit is always seen, or binding the edited node raises the BindError saying what is wrong.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from opwire.proxy_executor.context import BindContext
from opwire.proxy_executor.default_policy import DefaultPolicy
from opwire.proxy_executor.exec_policy import TORCH_NAMESPACES, refusals_collected
from opwire.proxy_executor.guard import active_guard
from opwire.proxy_executor.plan import NodePlan, bind_node
from opwire.proxy_executor.run_budgets import current_deadline, timed_out
from opwire.proxy_executor.write_check import Watch, WriteCheck
from opwire.schema import models as m
from opwire.schema.edits import edit_count, snapshot, track, unchanged
from opwire.schema.refs import tensor_names, value_names

__all__ = ["BoundGraph", "run_plan", "runner_of"]

Run = Callable[[Mapping[str, Any]], dict[str, Any]]
Protect = Callable[[], tuple[Mapping[str, str], frozenset[str]]]


def run_plan(p: NodePlan, values: Mapping[str, Any], defaults: Mapping[str, Any] | None) -> dict[str, Any]:
    """Run one bound node on named values; returns its outputs keyed by their serialized names."""
    if defaults is None:
        fast = p.fast if p.fast is not None else p.prepared()
        if fast:
            return fast(values)
    pos, kw = p.args(values.__getitem__, defaults)
    result = p.invoke(pos, kw)
    out: dict[str, Any] = {}
    p.store(result, out)
    return out


def runner_of(p: NodePlan) -> Run:
    """The quickest callable running `p` with no caller defaults."""
    fast = p.fast if p.fast is not None else p.prepared()
    if fast:
        return fast
    return lambda values: run_plan(p, values, None)


class BoundGraph:
    """The nodes of one graph bound to their targets; `run(env)` runs them in order, rebinding edited nodes."""

    def __init__(
        self,
        graph: m.Graph,
        where: str,
        policy: DefaultPolicy,
        ctx: BindContext,
        checker: Callable[[list[NodePlan]], None] | None = None,
    ) -> None:
        self.graph = graph
        self.checker = checker  # whole-graph checks of the bound plans (graphchecks), before any node runs
        self.where = where
        self.policy = policy
        self.ctx = ctx
        self.binds = 0  # how many nodes were bound so far (tests and benchmarks read it)
        self._lock = threading.Lock()
        self._nodes: list[m.Node] = []
        self._snapshots: list[list[Any]] = []
        self._plans: list[NodePlan] = []
        self._runs: list[Run] = []
        self._edits = -1  # bound on first run, so a bad node raises where the program runs
        self._reads: list[tuple[str, ...]] = []  # per node: the tensor names it receives
        self.protect: Protect | None = None
        """After binding: (protected input name -> label, the names keyed by identity); None: no write check."""
        self.write_check: WriteCheck | None = None
        """The undeclared-write check (`write_check`): a checking pass per new input layout, built on binding."""
        self._stable = False  # every node's argument shapes and values follow from the inputs' layout (`_stable`)
        self._steady: list[Run] | None = None  # the runs for a layout that passed: shape-only checks left out

    def run(self, env: dict[str, Any], observer: Callable[[m.Node, Mapping[str, Any]], None] | None = None) -> None:
        """Run every node on `env` (names -> values), adding each node's outputs to it (and showing `observer`).

        Under a wall-time budget (`budgets.time_limit`) the deadline is checked between nodes."""
        runs, nodes, plans = self._runs, self._nodes, self._plans
        if self._edits != edit_count():
            with self._lock:
                self._refresh()
                runs, nodes, plans = self._runs, self._nodes, self._plans
        deadline = current_deadline()
        check, key = self.write_check, None
        if check is not None:
            key = check.key(env)
            if check.holds(key):
                check = None  # this layout passed its checking pass: nothing new can reach a protected tensor
                runs = self._steady or runs  # and every node's shape-only checks passed on it
        run_guard = active_guard()  # each node under torch's warning handler: its kernel warnings name it
        if observer is None and deadline is None and check is None:
            if run_guard is None:
                for run in runs:
                    env.update(run(env))
            else:
                run_guard.run_nodes(plans, runs, env)
            return
        regions = check.regions(env) if check is not None else []
        reads = self._reads
        for i, (node, run) in enumerate(zip(nodes, runs, strict=True)):
            if deadline is not None and time.monotonic() > deadline:
                raise timed_out(plans[i].where)
            watch = Watch.before(plans[i].where, reads[i], env, regions) if regions else None
            try:
                out = run(env) if run_guard is None else run_guard.call(plans[i].where, run, env)
            except BaseException:
                if watch is not None:
                    watch.restore()  # whatever the node wrote before it failed is put back
                raise
            if watch is not None:
                watch.after()  # by storage and bytes, not annotations
            env.update(out)
            if observer is not None:
                observer(node, out)
        if check is not None and key is not None:
            check.passed(key, env)
            if self._stable and plans is self._plans:  # for each new layout: a verdict may have read data
                self._steady = _steady_runs(plans, runs)

    def bind(self) -> None:
        """Bind every node now (what the first run would do): binding errors surface here."""
        if self._edits != edit_count():
            with self._lock:
                self._refresh()

    @property
    def plans(self) -> list[NodePlan]:
        """The bound plan of each node, in graph order (as of the last run or bind)."""
        return list(self._plans)

    def _refresh(self) -> None:
        """Bind what is new or edited since the last look; keep every plan whose node is untouched."""
        edits = edit_count()
        if edits == self._edits:
            return
        track(self.graph)
        old = {id(n): i for i, n in enumerate(self._nodes)}
        nodes: list[m.Node] = list(self.graph.nodes)
        snapshots: list[Any] = []
        plans: list[NodePlan] = []
        runs: list[Any] = []
        with refusals_collected():  # one BindError naming every refused op of the graph and its subgraphs
            self._bind_nodes(nodes, old, snapshots, plans, runs)
        if self.checker is not None:
            self.checker(plans)
        self._reads = [tuple(n for na in p.node.inputs for n in tensor_names(na.arg)) for p in plans]
        self._stable, self._steady = _stable(plans), None
        if self.protect is not None:
            labels, fixed = self.protect()
            inputs = [n for a in self.graph.inputs for n in value_names(a)]
            self.write_check = WriteCheck(labels, fixed, inputs)
        self._nodes, self._snapshots, self._plans, self._runs = nodes, snapshots, plans, runs
        self._edits = edits

    def _bind_nodes(
        self, nodes: list[m.Node], old: dict[int, int], snapshots: list[Any], plans: list[NodePlan], runs: list[Any]
    ) -> None:
        for i, n in enumerate(nodes):
            j = old.get(id(n))
            if j is not None and self._nodes[j] is n and unchanged(self._snapshots[j], n):
                snapshots.append(self._snapshots[j])
                plans.append(self._plans[j])
                runs.append(self._runs[j])
                continue
            label = f"{self.where} node {n.name!r}" if n.name else f"{self.where} node {i}"
            plan = bind_node(n, label, self.policy, self.ctx)
            snapshots.append(snapshot(n))
            plans.append(plan)
            runs.append(runner_of(plan))
            self.binds += 1


def _stable(plans: list[NodePlan]) -> bool:
    """Whether every node's argument shapes, strides and values follow from the graph inputs' layout.

    True when every node is a torch op that torch does not tag `dynamic_output_shape` (nonzero, unique, boolean
    indexing, one_hot, bincount...) or `data_dependent_output` (item), or a symbolic-size helper: then a layout
    whose run passed every check gives each node the same arguments' shapes again. Higher-order ops (a branch
    chosen by data) and library ops (whose shapes torch does not describe) make a graph unstable."""
    for p in plans:
        if p.target.kind == "fixed":
            continue
        schema = p.target.schema
        if p.target.kind != "op" or schema is None or schema.namespace not in TORCH_NAMESPACES:
            return False
        if any(t.name in _DATA_SHAPED for t in getattr(p.target.fn, "tags", ())):
            return False
    return True


_DATA_SHAPED = frozenset({"dynamic_output_shape", "data_dependent_output"})


def _steady_runs(plans: list[NodePlan], runs: list[Run]) -> list[Run]:
    """The runs of a stable graph for a layout that passed: nodes whose checks read only shapes skip them.

    The memory estimates and their filters read shapes; a precondition whose every passing verdict was remembered
    by layout (`verdicts`) read none. A precondition that reads data keeps running, and so does a size rule
    (one_hot(-1), bincount)."""
    out: list[Run] = []
    for p, run in zip(plans, runs, strict=True):
        c = p.checks
        shapes_only = c is not None and (c.verdicts is None or c.verdicts.always)
        if c is None or c.size_rule is not None or (c.memory is None and not shapes_only):
            out.append(run)
        elif shapes_only:  # a copy of the plan without its checks
            out.append(runner_of(replace(p, checks=None, fast=None)))
        else:  # the precondition alone (its verdicts shared), on a copy of the plan
            out.append(runner_of(replace(p, checks=replace(c, memory=None, seen=None), fast=None)))
    return out
