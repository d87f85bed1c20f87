"""Deprecated: `opwire.proxy_executor.budgets` moved to `opwire.proxy_executor.run_budgets`."""

from opwire._lazy import moved_module

moved_module(__name__, "opwire.proxy_executor.run_budgets")
