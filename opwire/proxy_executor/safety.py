"""Deprecated: `opwire.proxy_executor.safety` moved to `opwire.proxy_executor.exec_policy`."""

from opwire._lazy import moved_module

moved_module(__name__, "opwire.proxy_executor.exec_policy")
