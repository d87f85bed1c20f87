"""Bind serialized operator calls to op schemas and invoke kernels through torch's dispatcher.

The names that need torch load on first use, so `opwire.proxy_executor.default_policy` (which the CLI's
parsers read) imports no torch.

Modules:
    allowlist: the op policy a file's ops are checked against: `allowlist.txt`, derived by `opset_source`
    aoti: AOTInductor's flattened calling convention for one bound node (`call_function`)
    bound: a graph bound once into node plans, kept honest about in-place edits
    checks: what a bound node checks in its run: argument values, preconditions, output memory
    child_stderr: the isolated child's stderr (warnings, a crash's last words), printed by the parent
    context: what an argument names beyond values: dispatcher ops (`as_operator`), subgraphs (`as_graph`)
    convert: serialized `Argument` members to Python values, one converter per member
    default_policy: `DefaultPolicy`: who fills an argument a serialized call leaves out
    estimate: a node's output bytes computed on the `meta` device, and the shape key they are kept by
    exec_policy: `ExecPolicy`: which ops a file may call, and the execution budgets
    executor: `ProxyExecutor`: serialized operator calls run through torch's dispatcher
    fast_calls: the executor's unguarded calls, each in a torch binding whose kernel warnings come back as OpwireWarning
    graphchecks: whole-graph checks made when a graph is bound, before any node runs
    guard: `RunGuard`: what a run may not leave behind (RNG state, grad mode, torch modes)
    isolate: a file's work run in a sandboxed child process, its results brought back as one record
    isolate_program: `ProgramRunner`/`run_program` with `isolate=True`: the program runs in a sandboxed child
    isolate_result: the one record a sandboxed child sends back (`IsolatedResult`), encoded and read strictly
    landlock: Landlock for the isolated child: read-only access to what it needs
    opset_source: the op policy derived from torch's registry by rule (`--check` compares it with the committed one)
    outputs: kernel results to serialized outputs: tensors and symbolic values by name, constants checked
    persistent: the persistent isolated runner: one sandboxed child serving every call of a `ProgramRunner`
    plan: one serialized node bound to its target once: a reusable plan of converters
    policy_report: what the op policy says of one op, and why
    policy_rules: the reviewed rules that place every ATen op in one class of the op policy
    precondition_families: one checked precondition per family of kernels that trust indices, offsets, companions
    preconditions: the checks admitted kernels need before they run, and argument values refused for every op
    run_budgets: execution budgets: `while_loop` iterations, wall time, i64 symbolic arithmetic
    runner: `run_program` and `ProgramRunner`: a serialized ExportedProgram run node by node
    sandbox: the isolated child's confinement: descriptors, terminal, Landlock, rlimits, seccomp
    shared_values: values in shared memory between the persistent child and its parent
    size_rules: output sizes of ops whose data decides their outputs' shapes
    syscalls: the isolated child's seccomp allowlist: syscall -> why it is allowed
    targets: which callables a node may name: dispatcher ops through `torch.ops`, plus one fixed table
    verdicts: precondition verdicts remembered by argument layout (for checks that read no tensor data)
    write_check: undeclared writes into protected inputs, found by storage and bytes
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from opwire._lazy import lazy_getattr, lazy_names
from opwire.errors import BindError, BudgetError, KernelError, UnknownTargetError
from opwire.proxy_executor.default_policy import DefaultPolicy

# public name -> module that defines it, imported on first use: most import torch, and `opwire --help` needs none
_LAZY = {
    "ExecPolicy": "opwire.proxy_executor.exec_policy",
    "ProxyExecutor": "opwire.proxy_executor.executor",
    "load_extern_nodes": "opwire.proxy_executor.executor",
    "ProgramRunner": "opwire.proxy_executor.runner",
    "run_program": "opwire.proxy_executor.runner",
    "in_process": "opwire.proxy_executor.isolate",
    "run_in_child": "opwire.proxy_executor.isolate",
    "progress_observer": "opwire.proxy_executor.isolate_program",
    "explain": "opwire.proxy_executor.policy_report",
    "policy_output": "opwire.proxy_executor.policy_report",
    "WHILE_LOOP_ITERATIONS": "opwire.proxy_executor.run_budgets",
    "check_time": "opwire.proxy_executor.run_budgets",
    "time_limit": "opwire.proxy_executor.run_budgets",
    "DEFAULT_TIMEOUT": "opwire.proxy_executor.sandbox",
    "Limits": "opwire.proxy_executor.sandbox",
    "default_max_memory": "opwire.proxy_executor.sandbox",
    "parse_size": "opwire.proxy_executor.sandbox",
}

if TYPE_CHECKING:  # what mypy and IDEs see for the lazy names
    from opwire.proxy_executor.exec_policy import ExecPolicy as ExecPolicy
    from opwire.proxy_executor.executor import ProxyExecutor as ProxyExecutor
    from opwire.proxy_executor.executor import load_extern_nodes as load_extern_nodes
    from opwire.proxy_executor.isolate import in_process as in_process
    from opwire.proxy_executor.isolate import run_in_child as run_in_child
    from opwire.proxy_executor.isolate_program import progress_observer as progress_observer
    from opwire.proxy_executor.policy_report import explain as explain
    from opwire.proxy_executor.policy_report import policy_output as policy_output
    from opwire.proxy_executor.run_budgets import WHILE_LOOP_ITERATIONS as WHILE_LOOP_ITERATIONS
    from opwire.proxy_executor.run_budgets import check_time as check_time
    from opwire.proxy_executor.run_budgets import time_limit as time_limit
    from opwire.proxy_executor.runner import ProgramRunner as ProgramRunner
    from opwire.proxy_executor.runner import run_program as run_program
    from opwire.proxy_executor.sandbox import DEFAULT_TIMEOUT as DEFAULT_TIMEOUT
    from opwire.proxy_executor.sandbox import Limits as Limits
    from opwire.proxy_executor.sandbox import default_max_memory as default_max_memory
    from opwire.proxy_executor.sandbox import parse_size as parse_size

__all__ = [
    "BindError",
    "BudgetError",
    "DefaultPolicy",
    "KernelError",
    "UnknownTargetError",
]
__all__ += lazy_names(_LAZY, __all__)

__getattr__ = lazy_getattr(
    __name__, __path__, _LAZY
)  # also `opwire.proxy_executor.<submodule>` without importing it first
