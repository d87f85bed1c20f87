"""Bind serialized operator calls to op schemas and invoke kernels through torch's dispatcher.

`executor` (ProxyExecutor), `targets` (what a file may name), `plan` (one node bound once), `context`
(operators and subgraphs an argument names), `convert` (Argument -> Python value), `outputs` (results ->
serialized outputs), `policy` (who fills omitted defaults), `flat` (AOTInductor's flattened convention),
`graph` (run_program: a whole program node by node), `safety` (the execution policy: refused ops),
`budgets` (while_loop iterations, wall time, i64 symbolic arithmetic).
"""

from __future__ import annotations

from opwire.errors import BindError, BudgetError, KernelError, UnknownTargetError
from opwire.proxy_executor.default_policy import DefaultPolicy
from opwire.proxy_executor.exec_policy import ExecPolicy
from opwire.proxy_executor.executor import ProxyExecutor, load_extern_nodes
from opwire.proxy_executor.runner import ProgramRunner, run_program

__all__ = [
    "BindError",
    "BudgetError",
    "DefaultPolicy",
    "ExecPolicy",
    "KernelError",
    "ProgramRunner",
    "ProxyExecutor",
    "UnknownTargetError",
    "load_extern_nodes",
    "run_program",
]
