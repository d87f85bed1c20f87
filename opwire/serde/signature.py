"""Deprecated: `opwire.serde.signature` moved to `opwire.program.signature` (what a program takes and returns)."""

from __future__ import annotations

import warnings

from opwire.program.signature import (
    Port,
    Signature,
    check_inputs,
    dtype_name,
    extern_inputs,
    node_outputs,
    op_name,
    program_signature,
    sym_text,
)

__all__ = [
    "Port",
    "Signature",
    "check_inputs",
    "dtype_name",
    "extern_inputs",
    "node_outputs",
    "op_name",
    "program_signature",
    "sym_text",
]

warnings.warn(
    "opwire.serde.signature moved to opwire.program.signature; import it from there",
    DeprecationWarning,
    stacklevel=2,
)
