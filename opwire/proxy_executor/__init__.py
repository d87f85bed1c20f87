"""Bind serialized operator calls to op schemas and invoke kernels through torch's dispatcher."""

from __future__ import annotations

from opwire.errors import BindError, KernelError, UnknownTargetError
from opwire.proxy_executor.executor import ProxyExecutor, load_extern_nodes
from opwire.proxy_executor.plan import BindContext, NodePlan, bind_node
from opwire.proxy_executor.policy import DefaultPolicy

__all__ = [
    "BindContext",
    "BindError",
    "DefaultPolicy",
    "KernelError",
    "NodePlan",
    "ProxyExecutor",
    "UnknownTargetError",
    "bind_node",
    "load_extern_nodes",
]
