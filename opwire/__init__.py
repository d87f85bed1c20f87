"""opwire: put PyTorch operator calls and exported graphs on the wire and bring them back to life.

The codecs load eagerly (they need only pydantic); executor-level names load on first use, so
`import opwire.schema` never imports the executor.

Modules:
    __main__: `python -m opwire` (what `torchrun -m opwire record ...` runs in every rank)
    _generated: the drift check and the write shared by the generators of committed, torch-derived tables
    _lazy: lazy faces: a package's names and public modules load on first attribute access
    _version: `__version__` (every layer may read it; nothing imports the face for it)
    cli: the `opwire` command, one module per subcommand
    demo: `make demo`: two built-in models exported, put on the wire and brought back
    errors: the exception hierarchy and `OpwireWarning`, importable by every layer
    program: the one opener: a path, bytes, a model or a torch program becomes an opened, typed object
    proxy_executor: serialized calls bound to op schemas and run through torch's dispatcher; `run_program`
    recording: recording operator calls, the trace formats, replay, comparison and trace diff
    schema: the Thrift IDL and what is derived from it: the generated models, the op-schema table
    serde: codecs (JSON, Thrift binary/compact), the .pt2 and .opw archives, tensors, the torch bridge
    validation: `validate_op`, the findings catalog, op-library snapshots, bc-check
    view: `opwire view`: a program as one self-contained interactive HTML page
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from opwire._lazy import lazy_names
from opwire._version import __version__
from opwire.errors import (
    BindError,
    BudgetError,
    DecodeError,
    EncodeError,
    KernelError,
    OpValidationError,
    OpwireError,
    OpwireWarning,
    UnknownTargetError,
)
from opwire.serde import dumps, loads

# public name -> module that defines it (imported lazily by __getattr__)
_LAZY = {
    "schema_diff": "opwire.schema.diff",
    "open": "opwire.program",
    "OpenedProgram": "opwire.program",
    "ProxyExecutor": "opwire.proxy_executor",
    "DefaultPolicy": "opwire.proxy_executor",
    "run_program": "opwire.proxy_executor",
    "record": "opwire.recording",
    "Trace": "opwire.recording",
    "load_trace": "opwire.recording",
    "replay": "opwire.recording",
    "ReplayReport": "opwire.recording",
    "diff_traces": "opwire.recording",
    "TraceDiff": "opwire.recording",
    "validate_op": "opwire.validation",
    "OpReport": "opwire.validation",
    "snapshot_ops": "opwire.validation",
    "bc_check": "opwire.validation",
    "BcReport": "opwire.validation",
    "view": "opwire.view",
}

if TYPE_CHECKING:  # what mypy and IDEs see for the lazy names: the real objects and signatures
    from opwire.program import OpenedProgram as OpenedProgram
    from opwire.program import open as open
    from opwire.proxy_executor import DefaultPolicy as DefaultPolicy
    from opwire.proxy_executor import ProxyExecutor as ProxyExecutor
    from opwire.proxy_executor import run_program as run_program
    from opwire.recording import ReplayReport as ReplayReport
    from opwire.recording import Trace as Trace
    from opwire.recording import TraceDiff as TraceDiff
    from opwire.recording import diff_traces as diff_traces
    from opwire.recording import load_trace as load_trace
    from opwire.recording import record as record
    from opwire.recording import replay as replay
    from opwire.schema.diff import schema_diff as schema_diff
    from opwire.validation import BcReport as BcReport
    from opwire.validation import OpReport as OpReport
    from opwire.validation import bc_check as bc_check
    from opwire.validation import snapshot_ops as snapshot_ops
    from opwire.validation import validate_op as validate_op
    from opwire.view import view as view

__all__ = [
    "BindError",
    "BudgetError",
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
]
__all__ += lazy_names(_LAZY, __all__)


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
