"""Bind serialized operator calls to op schemas and invoke kernels through torch's dispatcher.

`executor` (ProxyExecutor), `targets` (what a file may name), `plan` (one node bound once), `context`
(operators and subgraphs an argument names), `convert` (Argument -> Python value), `outputs` (results ->
serialized outputs), `policy` (who fills omitted defaults), `flat` (AOTInductor's flattened convention),
`graph` (run_program: a whole program node by node), `safety` (the execution policy: refused ops),
`budgets` (while_loop iterations, wall time, i64 symbolic arithmetic).

The names that need torch load on first use, so `opwire.proxy_executor.default_policy` (which the CLI's
parsers read) imports no torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from opwire._lazy import lazy_getattr
from opwire.errors import BindError, BudgetError, KernelError, UnknownTargetError
from opwire.proxy_executor.default_policy import DefaultPolicy

# public name -> module that defines it (imported lazily by __getattr__: each imports torch)
_LAZY = {
    "ExecPolicy": "opwire.proxy_executor.exec_policy",
    "ProxyExecutor": "opwire.proxy_executor.executor",
    "load_extern_nodes": "opwire.proxy_executor.executor",
    "ProgramRunner": "opwire.proxy_executor.runner",
    "run_program": "opwire.proxy_executor.runner",
}

if TYPE_CHECKING:  # what mypy and IDEs see for the lazy names
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

__getattr__ = lazy_getattr(
    __name__, __path__, _LAZY
)  # also `opwire.proxy_executor.<submodule>` without importing it first
