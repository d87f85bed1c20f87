"""Deprecated: `opwire.proxy_executor.policy` moved to `opwire.proxy_executor.default_policy`."""

from opwire._lazy import moved_module

moved_module(__name__, "opwire.proxy_executor.default_policy")
