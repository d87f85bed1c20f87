"""`opwire.run_program`: execute a serialized ExportedProgram node by node through the proxy executor.

No FX, no torch deserializer: the graph's input specs bind user inputs (flattened by the program's
pytree spec), parameters, buffers and constants from the archive; every node runs through
`ProxyExecutor.call` (dispatcher ops, `operator.getitem`, symbolic-size helpers, and the higher-order
ops of the executor's table, whose subgraphs this module runs); output specs pick the user outputs
and write buffer mutations back.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.utils._pytree as pytree

from opwire.errors import BindError, DecodeError
from opwire.proxy_executor.context import BindContext
from opwire.proxy_executor.convert import convert
from opwire.proxy_executor.executor import ProxyExecutor
from opwire.proxy_executor.policy import DefaultPolicy
from opwire.schema import models as m

__all__ = ["ProgramRunner", "run_program"]

Env = dict[str, Any]


class ProgramRunner:
    """A loaded program: tensors rebuilt once; calls run like `ep.module()(...)`, buffers kept across calls."""

    def __init__(
        self,
        program_or_archive: m.OpwireArchive | m.ExportedProgram | str | Path,
        device: str | torch.device | None = None,
        policy: DefaultPolicy | str = DefaultPolicy.FROM_SCHEMA,
        executor: ProxyExecutor | None = None,
    ) -> None:
        archive = _as_archive(program_or_archive)
        self.program = archive.program
        self.device = device
        self.subgraphs = _Subgraphs(self)
        self.executor = (
            executor if executor is not None else ProxyExecutor(policy=policy, subgraph_runner=self.subgraphs)
        )
        gm = self.program.graph_module
        self.graph = gm.graph
        self.signature = gm.signature
        self.state, self.constants = _load_tensors(archive, device)
        self.in_spec, self.out_spec = _specs(gm)
        self._lock = threading.Lock()

    # --------------------------------------------------------------------------------------- calls
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the program on `args`/`kwargs`; buffer mutations update `self.state`."""
        env = self._bind_inputs(args, kwargs)
        self._run_nodes(self.graph, env, "graph")
        return self._outputs(env)

    def _bind_inputs(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Env:
        leaves = _flatten_user(args, kwargs, self.in_spec)
        specs = self.signature.input_specs
        if len(specs) != len(self.graph.inputs):
            raise DecodeError(
                f"the signature has {len(specs)} input specs but the graph {len(self.graph.inputs)} inputs",
                "graph_module.signature.input_specs",
            )
        env: Env = {}
        users = iter(leaves)
        n_user = sum(1 for s in specs if s.type == "user_input")
        if len(leaves) != n_user:
            raise BindError(f"the program takes {n_user} flattened user inputs, got {len(leaves)}")
        for i, (spec, arg) in enumerate(zip(specs, self.graph.inputs, strict=True)):
            value = self._input_value(spec, users, f"input_specs[{i}]")
            name = _arg_name(arg)
            if name is not None:
                env[name] = value
        return env

    def _input_value(self, spec: m.InputSpec, users: Any, where: str) -> Any:
        kind, v = spec.type, spec.value
        if kind == "user_input":
            return next(users)
        if kind == "parameter":
            return self.state[v.parameter_name]
        if kind == "buffer":
            return self.state[v.buffer_name] if v.buffer_name in self.state else self.constants[v.buffer_name]
        if kind == "tensor_constant":
            return self.constants[v.tensor_constant_name]
        if kind == "constant_input":
            return v.value.value if v.value.type != "as_none" else None
        if kind == "token":
            return torch.empty(0)
        raise BindError(
            f"{where}: input spec {kind} is not supported by opwire's graph runner "
            "(supported: user_input, parameter, buffer, tensor_constant, constant_input, token)"
        )

    def _run_nodes(self, graph: m.Graph, env: Env, where: str) -> None:
        call = self.executor.call
        for node in graph.nodes:
            env.update(call(node, env))

    def _outputs(self, env: Env) -> Any:
        user: list[Any] = []
        for i, (spec, arg) in enumerate(zip(self.signature.output_specs, self.graph.outputs, strict=True)):
            value = _value(arg, env, f"graph output {i}")
            kind = spec.type
            if kind in ("user_output", "loss_output"):
                user.append(value)
            elif kind == "buffer_mutation":
                self._write_back(
                    self.state if spec.value.buffer_name in self.state else self.constants,
                    spec.value.buffer_name,
                    value,
                )
            elif kind == "parameter_mutation":
                self._write_back(self.state, spec.value.parameter_name, value)
            elif kind == "user_input_mutation":
                pass  # user inputs are the caller's: the functional graph returns the new value, as torch does
            elif kind != "token":
                user.append(value)
        if self.out_spec is None:
            return user[0] if len(user) == 1 else tuple(user)
        return pytree.tree_unflatten(user, self.out_spec)

    @staticmethod
    def _write_back(table: dict[str, torch.Tensor], name: str, value: Any) -> None:
        old = table.get(name)
        if isinstance(old, torch.Tensor) and isinstance(value, torch.Tensor) and old.shape == value.shape:
            with torch.no_grad():
                old.copy_(value)
        else:
            table[name] = value

    # ----------------------------------------------------------------------------------- subgraphs
    def run_subgraph(self, graph_arg: m.GraphArgument, args: Sequence[Any]) -> Any:
        """Run a subgraph of a higher-order op on positional `args`."""
        graph = graph_arg.graph
        where = f"subgraph {graph_arg.name!r}"
        if len(args) != len(graph.inputs):
            raise BindError(f"{where} takes {len(graph.inputs)} inputs, got {len(args)}")
        env: Env = {}
        for arg, value in zip(graph.inputs, args, strict=True):
            name = _arg_name(arg)
            if name is not None:
                env[name] = value
        self._run_nodes(graph, env, where)
        outs = [_value(a, env, f"{where} output {i}") for i, a in enumerate(graph.outputs)]
        return outs[0] if graph.is_single_tensor_return else tuple(outs)


class _Subgraphs:
    """The executor's subgraph runner: callables bound once at plan time, run by the runner of the current call."""

    def __init__(self, runner: ProgramRunner) -> None:
        self.default = runner
        self.local = threading.local()  # run_program reuses one executor across calls, maybe from several threads

    def __call__(self, graph_arg: m.GraphArgument) -> Callable[..., Any]:
        return lambda *args: (getattr(self.local, "runner", None) or self.default).run_subgraph(graph_arg, args)


def _arg_name(arg: m.Argument) -> str | None:
    kind, v = arg.type, arg.value
    if kind in ("as_tensor", "as_custom_obj"):
        return str(v.name)
    if kind in ("as_sym_int", "as_sym_float", "as_sym_bool") and v.type == "as_name":
        return str(v.as_name)
    if kind == "as_token" or hasattr(v, "name"):
        return str(v.name)
    return None


def _value(arg: m.Argument, env: Env, where: str) -> Any:
    conv = convert(arg, where, BindContext())
    if conv.get is None:
        return conv.const
    try:
        return conv.get(env.__getitem__)
    except KeyError as exc:
        raise BindError(f"{where}: refers to {exc.args[0]!r}, which no input or node produced") from None


def _specs(gm: m.GraphModule) -> tuple[Any, Any]:
    """The pytree specs of the top-level call (None when the program has no module call graph)."""
    from opwire.serde.pytree_spec import loads_spec

    if not gm.module_call_graph or gm.module_call_graph[0].signature is None:
        return None, None
    sig = gm.module_call_graph[0].signature
    where = "graph_module.module_call_graph[0].signature"
    return loads_spec(sig.in_spec, f"{where}.in_spec"), loads_spec(sig.out_spec, f"{where}.out_spec")


def _flatten_user(args: Sequence[Any], kwargs: Mapping[str, Any], spec: Any) -> list[Any]:
    leaves, got = pytree.tree_flatten((tuple(args), dict(kwargs)))
    if spec is not None and got != spec:
        if spec.num_leaves == len(leaves):
            return list(leaves)  # same leaves, different containers (e.g. a list for a tuple): accept, as torch does
        raise BindError(
            f"Expected inputs shaped like the exported ones ({spec.num_leaves} values: {_one_line(spec)}), got "
            f"{len(leaves)} ({_one_line(got)}); pass the same (args, kwargs) structure the program was exported with"
        )
    return list(leaves)


def _one_line(spec: Any) -> str:
    return " ".join(str(spec).split())


# ------------------------------------------------------------------------------------------ loading
def _as_archive(obj: Any) -> m.OpwireArchive:
    if isinstance(obj, str | Path):
        from opwire.serde.detect import load_any

        obj = load_any(obj)
    if isinstance(obj, torch.export.ExportedProgram):
        from opwire.serde.torch_bridge import archive_from_exported_program

        obj = archive_from_exported_program(obj)
    if isinstance(obj, m.ExportedProgram):
        obj = m.OpwireArchive(program=obj, weights={}, constants={}, opwire_version="")
    if not isinstance(obj, m.OpwireArchive):
        raise DecodeError(
            f"Expected an OpwireArchive, ExportedProgram model, torch ExportedProgram or a path, got "
            f"{type(obj).__name__}"
        )
    return obj


_CACHE: dict[tuple[int, str], tuple[weakref.ref[Any], dict[str, torch.Tensor], dict[str, torch.Tensor]]] = {}


def _load_tensors(
    archive: m.OpwireArchive, device: str | torch.device | None
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """Parameters/persistent buffers and constants as tensors (rebuilt once per archive; buffers copied per runner)."""
    from opwire.serde import tensors as _tensors

    key = (id(archive), str(device))
    hit = _CACHE.get(key)
    if hit is None or hit[0]() is not archive:
        state = {k: _tensors.to_tensor(v, device, f"weights[{k!r}]") for k, v in archive.weights.items()}
        consts = {k: _tensors.to_tensor(v, device, f"constants[{k!r}]") for k, v in archive.constants.items()}
        for t in [*state.values(), *consts.values()]:
            t.requires_grad_(False)
        _check_bound(archive.program, state, consts)
        _CACHE.clear() if len(_CACHE) > 32 else None
        hit = _CACHE[key] = (weakref.ref(archive), state, consts)
    _, state, consts = hit
    buffers = {s.value.buffer_name for s in archive.program.graph_module.signature.input_specs if s.type == "buffer"}
    mutated = {
        s.value.parameter_name
        for s in archive.program.graph_module.signature.output_specs
        if s.type == "parameter_mutation"
    }
    copy = buffers | mutated
    return (
        {k: v.clone() if k in copy else v for k, v in state.items()},
        {k: v.clone() if k in copy else v for k, v in consts.items()},
    )


def _check_bound(program: m.ExportedProgram, state: Mapping[str, Any], consts: Mapping[str, Any]) -> None:
    for i, spec in enumerate(program.graph_module.signature.input_specs):
        v = spec.value
        name = {"parameter": "parameter_name", "buffer": "buffer_name", "tensor_constant": "tensor_constant_name"}
        if spec.type in name and getattr(v, name[spec.type]) not in state and getattr(v, name[spec.type]) not in consts:
            raise DecodeError(
                f"the program binds {spec.type} {getattr(v, name[spec.type])!r} but the archive holds no tensor for "
                f"it - at `graph_module.signature.input_specs[{i}]`; pass an OpwireArchive with its weights "
                "(opwire.serde.pt2.read or torch_bridge.archive_from_exported_program)",
                f"graph_module.signature.input_specs[{i}]",
            )


def run_program(
    program_or_archive: m.OpwireArchive | m.ExportedProgram | str | Path,
    args: Sequence[Any],
    kwargs: Mapping[str, Any] | None = None,
    device: str | torch.device | None = None,
) -> Any:
    """Run a serialized program once on `args`/`kwargs` (outputs shaped by its pytree spec; buffers untouched)."""
    archive = _as_archive(program_or_archive)
    key = (id(archive), str(device))
    hit = _EXECUTORS.get(key)
    if hit is None or hit[0]() is not archive:
        runner = ProgramRunner(archive, device=device)
        if len(_EXECUTORS) > 32:
            _EXECUTORS.clear()
        _EXECUTORS[key] = (weakref.ref(archive), runner.executor, runner.subgraphs)
        return runner(*args, **(kwargs or {}))
    runner = ProgramRunner(archive, device=device, executor=hit[1])  # bound plans reused, buffers fresh
    hit[2].local.runner = runner
    try:
        return runner(*args, **(kwargs or {}))
    finally:
        hit[2].local.runner = None


# archive -> executor whose plans are bound to its nodes (plans are keyed by node identity)
_EXECUTORS: dict[tuple[int, str], tuple[weakref.ref[Any], ProxyExecutor, _Subgraphs]] = {}
