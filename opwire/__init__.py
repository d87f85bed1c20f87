"""opwire: put PyTorch operator calls and exported graphs on the wire and bring them back to life.

The codecs load eagerly (they need only pydantic); executor-level names load on first use, so
`import opwire.schema` never imports the executor.
"""

from __future__ import annotations

import importlib
from typing import Any

from opwire._warnings import OpwireWarning
from opwire.errors import (
    BindError,
    DecodeError,
    EncodeError,
    KernelError,
    OpValidationError,
    OpwireError,
    UnknownTargetError,
)
from opwire.serde import dumps, loads

__version__ = "0.1.0"

# public name -> module that defines it (imported lazily by __getattr__)
_LAZY = {
    "schema_diff": "opwire.schema.diff",
    "ProxyExecutor": "opwire.proxy_executor.executor",
    "DefaultPolicy": "opwire.proxy_executor.policy",
    "validate_op": "opwire.proxy_executor.validate",
    "OpReport": "opwire.proxy_executor.validate",
    "snapshot_ops": "opwire.proxy_executor.snapshot",
    "bc_check": "opwire.proxy_executor.bccheck",
    "BcReport": "opwire.proxy_executor.bccheck",
    "record": "opwire.proxy_executor.record",
    "Trace": "opwire.proxy_executor.record",
    "load_trace": "opwire.proxy_executor.record",
    "replay": "opwire.proxy_executor.replay",
    "ReplayReport": "opwire.proxy_executor.replay",
    "run_program": "opwire.proxy_executor.graph",
}

__all__ = [
    "BindError",
    "DecodeError",
    "EncodeError",
    "KernelError",
    "OpValidationError",
    "OpwireError",
    "OpwireWarning",
    "UnknownTargetError",
    "__version__",
    "dumps",
    "loads",
    *_LAZY,
]


def __getattr__(name: str) -> Any:
    """Load executor-level names on first use."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'opwire' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
