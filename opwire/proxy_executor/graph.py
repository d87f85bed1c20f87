"""Deprecated: `opwire.proxy_executor.graph` moved to `opwire.proxy_executor.runner`."""

from opwire._lazy import moved_module

moved_module(__name__, "opwire.proxy_executor.runner")
