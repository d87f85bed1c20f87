"""`opwire.run_program` and `ProgramRunner`: execute a serialized ExportedProgram node by node.

No FX, no torch deserializer. The program is opened once (`opwire.open`: tensors mapped, specs checked);
the graph's input specs bind user inputs (flattened by the program's pytree spec), parameters, buffers and
constants, each spec read through `opwire.schema.spec_roles`. The graph is bound once into a `BoundGraph`
(`bound.py`: one `NodePlan` per node, from `plan.bind_node`, the binder `ProxyExecutor` uses too), which
runs dispatcher ops, `operator.getitem`, symbolic-size helpers and the higher-order ops of the fixed table,
whose subgraphs this module binds and runs. Output specs pick the user outputs and write buffer and
parameter mutations back. Every run restores the state it found (`guard.RunGuard`) within the run's
budgets (`run_budgets`); `isolate=True` runs it in a sandboxed child kept between calls (`persistent`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.utils._pytree as pytree

from opwire import program
from opwire.errors import BindError, DecodeError
from opwire.program import OpenedProgram, bind_inputs
from opwire.program.opened import LazyArchive
from opwire.program.specs import unregistered_pytree_types
from opwire.proxy_executor.bound import BoundGraph
from opwire.proxy_executor.context import BindContext
from opwire.proxy_executor.convert import convert
from opwire.proxy_executor.default_policy import DefaultPolicy
from opwire.proxy_executor.exec_policy import ExecPolicy
from opwire.proxy_executor.graphchecks import (
    check_static_memory,
    check_writes,
    declared_writes,
    protected_inputs,
)
from opwire.proxy_executor.guard import RunGuard
from opwire.proxy_executor.isolate_program import api_limits, run_isolated
from opwire.proxy_executor.persistent import IsolatedChild, child_for
from opwire.proxy_executor.plan import NodePlan
from opwire.proxy_executor.run_budgets import MAX_MEMORY, WHILE_LOOP_ITERATIONS, loop_budget, time_limit
from opwire.schema import models as m
from opwire.schema.refs import value_names
from opwire.schema.spec_roles import spec_member, target_name

__all__ = ["ProgramRunner", "run_program", "unregistered_pytree_types"]

Env = dict[str, Any]
Openable = (
    m.OpwireArchive
    | m.ExportedProgram
    | OpenedProgram
    | LazyArchive
    | torch.export.ExportedProgram
    | str
    | Path
    | bytes
)
"""What a program can be given as: anything `opwire.open` opens as a program (a path, a program's bytes, a model,
an opened program, a lazy archive, a torch ExportedProgram)."""


class ProgramRunner:
    """A loaded program: tensors rebuilt and nodes bound once; calls run like `ep.module()(...)`.

    Buffers live in `self.state` across calls. The graph (and each subgraph) is bound once into a list of
    plans; an in-place edit of the program's nodes afterwards is seen: the edited nodes are bound again
    before the next run (`opwire.proxy_executor.bound`). The execution policy (`safety.ExecPolicy`:
    `allow_ops`, `max_while_iterations`, `timeout` per call, `max_memory`) applies to the graph and every subgraph;
    `max_memory=` only builds the policy (it may not disagree with a given `exec_policy`).
    """

    def __init__(
        self,
        program_or_archive: Openable,
        device: str | torch.device | None = None,
        policy: DefaultPolicy | str = DefaultPolicy.FROM_SCHEMA,
        observer: Callable[[m.Node, Mapping[str, Any]], None] | None = None,
        *,
        allow_ops: Iterable[str] = (),
        max_while_iterations: int = WHILE_LOOP_ITERATIONS,
        timeout: float | None = None,
        exec_policy: ExecPolicy | None = None,
        isolate: bool = False,
        max_memory: int | None = None,
    ) -> None:
        self.isolate = isolate  # run each call in a sandboxed child (opwire.proxy_executor.isolate_program)
        if exec_policy is None:
            budget = MAX_MEMORY if max_memory is None else max_memory
            exec_policy = ExecPolicy(allow_ops, max_while_iterations, timeout, budget)
        elif max_memory is not None and max_memory != exec_policy.max_memory:
            raise BindError(
                f"max_memory={max_memory} disagrees with exec_policy.max_memory={exec_policy.max_memory}; pass the "
                "budget in one place (the policy's is the one that applies)"
            )
        self.exec_policy = exec_policy
        opened = program.open(program_or_archive, expect="program")
        self.observer = observer  # called after each top-level node with its outputs (e.g. `opwire run --save-nodes`)
        self.opened: OpenedProgram = opened
        self.program = opened.program
        self.device = device
        self.policy = DefaultPolicy.parse(policy)
        gm = self.program.graph_module
        self.graph = gm.graph
        self.signature = gm.signature
        self.in_spec, self.out_spec = opened.check()  # specs parsed and bindings checked once per opened program
        self._base_state, self._base_constants = opened.tensors(device)
        if isinstance(program_or_archive, str | Path):
            opened.close()  # opened here from a path: everything needed is read, the file is not kept open
        self.state, self.constants = _fresh(self._base_state, self._base_constants, self.program)
        self._subgraphs: dict[int, tuple[m.Graph, BoundGraph]] = {}
        self._sub_lock = threading.Lock()
        inputs = protected_inputs(self.graph, self.signature)
        declared = declared_writes(self.graph, self.signature) | {
            k for k, v in inputs.items() if v.startswith("buffer")
        }
        self._copied: set[str] = set()  # user inputs the graph writes into: each run writes into a copy

        def check(plans: list[NodePlan]) -> None:
            copied: set[str] = set()
            check_writes(plans, inputs, declared, copied)
            check_static_memory(self.graph, plans, self.exec_policy.max_memory)
            self._copied = copied

        ctx = BindContext(self._subgraph, self.exec_policy)
        self.bound = BoundGraph(self.graph, "graph", self.policy, ctx, check)

        def protect() -> tuple[dict[str, str], frozenset[str]]:  # what no run may write, whatever the annotations
            protected = {k: v for k, v in inputs.items() if k not in declared and k not in self._copied}
            return protected, frozenset(k for k, v in protected.items() if not v.startswith("user input"))

        self.bound.protect = protect  # checked by storage on the first run of each input layout (write_check)

    @property
    def max_memory(self) -> int:
        """The execution-memory budget in bytes: the execution policy's (`exec_policy.max_memory`), its one source."""
        return self.exec_policy.max_memory

    # --------------------------------------------------------------------------------------- calls
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the program on `args`/`kwargs`; buffer mutations update `self.state`."""
        return self.run_with(self.state, self.constants, args, kwargs)

    def run_fresh(self, args: Sequence[Any], kwargs: Mapping[str, Any] | None = None) -> Any:
        """Run once with fresh copies of the buffers (`self.state` untouched): what `run_program` does."""
        if self.isolate:
            return self._isolated_child().call(True, args, kwargs or {})
        state, constants = self.fresh_tables()
        return self.run_with(state, constants, args, kwargs or {})

    def fresh_tables(self) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """Fresh copies of the parameter/buffer tables (the ones a run may write)."""
        return _fresh(self._base_state, self._base_constants, self.program)

    def close(self) -> None:
        """End the persistent isolated children of this runner (`isolate=True`); the next call starts one again."""
        for child in self.__dict__.get("_isolated_children", {}).values():
            child.close()

    def _isolated_child(self) -> IsolatedChild:
        return child_for(self, api_limits(self.max_memory, self.exec_policy.timeout))

    def run_with(
        self, state: dict[str, torch.Tensor], constants: dict[str, torch.Tensor], args: Sequence[Any], kwargs: Any
    ) -> Any:
        """Run the program on `args`/`kwargs` reading and updating the given parameter/buffer tables."""
        if self.isolate and state is self.state and constants is self.constants:
            return self._isolated_child().call(False, args, kwargs)  # the persistent child (its copy of the tables)
        if self.isolate:
            limits = api_limits(self.max_memory, self.exec_policy.timeout)
            return run_isolated(self, state, constants, args, kwargs, limits)
        env = self._bind_inputs(state, constants, args, kwargs)
        policy = self.exec_policy
        with RunGuard("graph"), time_limit(policy.timeout), loop_budget(policy.max_while_iterations):
            self.bound.bind()
            for name in self._copied:
                if isinstance(env.get(name), torch.Tensor):
                    env[name] = env[name].clone()
            self.bound.run(env, self.observer)
        return self._outputs(state, constants, env)

    @property
    def binds(self) -> int:
        """How many node bindings this runner made (graph and subgraphs): grows only when nodes are edited."""
        return self.bound.binds + sum(b.binds for _, b in self._subgraphs.values())

    def _bind_inputs(
        self, state: Mapping[str, Any], constants: Mapping[str, Any], args: Sequence[Any], kwargs: Mapping[str, Any]
    ) -> Env:
        leaves = _flatten_user(args, kwargs, self.in_spec)
        specs = self.signature.input_specs
        if len(specs) != len(self.graph.inputs):
            raise DecodeError(
                f"the signature has {len(specs)} input specs but the graph {len(self.graph.inputs)} inputs",
                "graph_module.signature.input_specs",
            )
        env: Env = {}
        users = iter(leaves)
        roles = [spec_member(s).role for s in specs]
        n_user, n_const = roles.count("user_input"), roles.count("constant_input")
        if len(leaves) not in (n_user, n_user + n_const):
            raise BindError(f"the program takes {n_user} flattened user inputs, got {len(leaves)}")
        # the pytree spec counts constant inputs (e.g. use_cache=False) among the leaves: they take one each
        fed_constants = n_const > 0 and len(leaves) == n_user + n_const
        for i, (spec, arg) in enumerate(zip(specs, self.graph.inputs, strict=True)):
            if fed_constants and roles[i] == "constant_input":
                _check_constant(spec.value, next(users), f"input_specs[{i}]")
            value = _input_value(spec, users, state, constants, f"input_specs[{i}]")
            name = _arg_name(arg)
            if name is not None:
                env[name] = value
        return env

    def _outputs(self, state: dict[str, torch.Tensor], constants: dict[str, torch.Tensor], env: Env) -> Any:
        user: list[Any] = []
        for i, (spec, arg) in enumerate(zip(self.signature.output_specs, self.graph.outputs, strict=True)):
            value = _value(arg, env, f"graph output {i}")
            entry, target = spec_member(spec), target_name(spec)
            if entry.role == "write_back" and entry.target_kind in ("buffer", "parameter") and target is not None:
                _write_back(state if target in state or entry.target_kind == "parameter" else constants, target, value)
            elif entry.role not in ("write_back", "token"):  # a user input written back stays the caller's
                user.append(value)  # (the functional graph returns the new value, as torch does)
        if self.out_spec is None:
            return user[0] if len(user) == 1 else tuple(user)
        return pytree.tree_unflatten(user, self.out_spec)

    # ----------------------------------------------------------------------------------- subgraphs
    def _subgraph(self, graph_arg: m.GraphArgument) -> Callable[..., Any]:
        """The callable a higher-order op's plan calls for subgraph `graph_arg` (bound once, on first run)."""
        graph = graph_arg.graph
        with self._sub_lock:
            entry = self._subgraphs.get(id(graph))
            if entry is None or entry[0] is not graph:
                where = f"subgraph {graph_arg.name!r}"
                inputs = protected_inputs(graph, None)
                inputs = {k: f"{where} input {k!r}" for k in inputs}
                sub = BoundGraph(
                    graph,
                    where,
                    self.policy,
                    BindContext(self._subgraph, self.exec_policy),
                    lambda plans: check_writes(plans, inputs, set()),
                )
                sub.protect = lambda: (inputs, frozenset())  # a subgraph writes none of its inputs
                entry = self._subgraphs[id(graph)] = (graph, sub)
        bound = entry[1]
        bound.bind()  # with the graph that names it: every node of every subgraph is checked before any runs
        return lambda *args: _run_subgraph(bound, graph_arg, args)


def _input_value(
    spec: m.InputSpec, users: Any, state: Mapping[str, Any], constants: Mapping[str, Any], where: str
) -> Any:
    role, target, v = spec_member(spec).role, target_name(spec), spec.value
    if role == "user_input":
        return next(users)
    if role in ("parameter", "buffer", "tensor_constant") and target is not None:
        return state[target] if target in state else constants[target]
    if role == "constant_input":
        return v.value.value if v.value.type != "as_none" else None
    if role == "token":
        return torch.empty(0)
    raise BindError(
        f"{where}: input spec {spec.type} is not supported by opwire's graph runner "
        "(supported: user_input, parameter, buffer, tensor_constant, constant_input, token)"
    )


def _write_back(table: dict[str, torch.Tensor], name: str, value: Any) -> None:
    old = table.get(name)
    if isinstance(old, torch.Tensor) and isinstance(value, torch.Tensor) and old.shape == value.shape:
        with torch.no_grad():
            old.copy_(value)
    else:
        table[name] = value


def _run_subgraph(bound: BoundGraph, graph_arg: m.GraphArgument, args: Sequence[Any]) -> Any:
    graph = bound.graph
    where = f"subgraph {graph_arg.name!r}"
    if len(args) != len(graph.inputs):
        raise BindError(f"{where} takes {len(graph.inputs)} inputs, got {len(args)}")
    env: Env = {}
    for arg, value in zip(graph.inputs, args, strict=True):
        name = _arg_name(arg)
        if name is not None:
            env[name] = value
    bound.run(env)
    outs = [_value(a, env, f"{where} output {i}") for i, a in enumerate(graph.outputs)]
    return outs[0] if graph.is_single_tensor_return else tuple(outs)


def _check_constant(spec: m.InputToConstantInputSpec, given: Any, where: str) -> None:
    """The program was specialized to a constant input's value: another value is refused, as torch does."""
    expected = None if spec.value.type == "as_none" else spec.value.value
    if given != expected or type(given) is not type(expected):
        raise BindError(
            f"{where}: input {spec.name!r} was exported as the constant {expected!r}, got {given!r}; "
            "pass the same value (re-export the program to use another)"
        )


def _arg_name(arg: m.Argument) -> str | None:
    """The name a graph input binds (a tensor, symbol, object or token); None for a constant."""
    names = value_names(arg)
    return names[0] if len(names) == 1 else None


def _value(arg: m.Argument, env: Env, where: str) -> Any:
    conv = convert(arg, where, BindContext())
    if conv.get is None:
        return conv.const
    try:
        return conv.get(env.__getitem__)
    except KeyError as exc:
        raise BindError(f"{where}: refers to {exc.args[0]!r}, which no input or node produced") from None


def _flatten_user(args: Sequence[Any], kwargs: Mapping[str, Any], spec: pytree.TreeSpec | None) -> list[Any]:
    leaves, got = pytree.tree_flatten((tuple(args), dict(kwargs)))
    if spec is not None and got != spec:
        if spec.num_leaves == len(leaves):
            return list(leaves)  # same leaves, different containers (e.g. a list for a tuple): accept, as torch does
        raise BindError(
            f"Expected inputs shaped like the exported ones ({spec.num_leaves} values: {_one_line(spec)}), got "
            f"{len(leaves)} ({_one_line(got)}); pass the same (args, kwargs) structure the program was exported with"
        )
    return list(leaves)


def _one_line(spec: pytree.TreeSpec) -> str:
    return " ".join(str(spec).split())


# ------------------------------------------------------------------------------------------ running
def _fresh(
    state: dict[str, torch.Tensor], consts: dict[str, torch.Tensor], program: m.ExportedProgram
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """Tables for one run: what the program mutates (buffers, mutated parameters) copied, the rest shared."""
    sig = program.graph_module.signature
    copy = {target_name(s) for s in sig.input_specs if spec_member(s).role == "buffer"} | {
        target_name(s)
        for s in sig.output_specs
        if spec_member(s).role == "write_back" and s.type != "user_input_mutation"
    }
    return (
        {k: v.clone() if k in copy else v for k, v in state.items()},
        {k: v.clone() if k in copy else v for k, v in consts.items()},
    )


def run_program(
    program_or_archive: Openable,
    args: Sequence[Any] | Mapping[str, Any],
    kwargs: Mapping[str, Any] | None = None,
    device: str | torch.device | None = None,
    *,
    allow_ops: Iterable[str] = (),
    max_while_iterations: int = WHILE_LOOP_ITERATIONS,
    timeout: float | None = None,
    isolate: bool = False,
    max_memory: int = MAX_MEMORY,
) -> Any:
    """Run a serialized program once on `args`/`kwargs` (outputs shaped by its pytree spec; buffers untouched).

    `program_or_archive` is anything `opwire.open` opens as a program: a path (.pt2, JSON, Thrift), an
    opened program, a lazy `opwire.serde.pt2.open(...)` archive, a model or a torch ExportedProgram. Given
    the same opened program or model again, the runner built the first time is reused (nodes bound once,
    tensors rebuilt once); editing the model's nodes in between is seen, replacing its weights or constants
    builds a new runner. `args` may be the user inputs by name (a dict, as `opwire.program.read_inputs` reads
    an inputs file): they are bound in the program's order and checked against its signature first, as
    `opwire run` binds them (`opwire.program.bind_inputs`). `allow_ops` runs ops the execution policy refuses by
    default; `max_while_iterations` and `timeout` (seconds, between nodes) are the run's budgets (docs/executor.md).
    `isolate=True` runs it in a sandboxed child process (`max_memory` bytes of address space, no writes, exec
    or sockets; a crash is a KernelError naming the node): docs/security.md.
    """
    exec_policy = ExecPolicy(allow_ops, max_while_iterations, timeout, max_memory)
    runner = _runner_for(program_or_archive, device, exec_policy)
    if isinstance(args, Mapping):
        if kwargs:
            raise BindError("pass the inputs either by name (a dict as args) or as args and kwargs, not both")
        args, kwargs = bind_inputs(runner.opened, args)
    if isolate:  # the opened program's persistent sandboxed child, on fresh buffers each call
        return child_for(runner, api_limits(runner.max_memory, timeout)).call(True, args, kwargs or {})
    return runner.run_fresh(args, kwargs)


def _runner_for(obj: Openable, device: str | torch.device | None, exec_policy: ExecPolicy) -> ProgramRunner:
    """The runner of the opened program for this device and policy: the opened program owns it."""
    opened = program.open(obj, expect="program")
    return opened.bound(
        ("runner", str(device), exec_policy.key()),
        lambda: ProgramRunner(opened, device=device, exec_policy=exec_policy),
    )
