"""Deprecated: `opwire.serde.signature` moved to `opwire.program.signature` (what a program takes and returns)."""

from opwire._lazy import moved_module

moved_module(__name__, "opwire.program.signature")
