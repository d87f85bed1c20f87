"""Deprecated: `opwire.proxy_executor.flat` moved to `opwire.proxy_executor.aoti`."""

from opwire._lazy import moved_module

moved_module(__name__, "opwire.proxy_executor.aoti")
