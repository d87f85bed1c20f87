"""Importing this registers version 2 of `opwire_bc` (for `--import` in CLI tests)."""

from __future__ import annotations

from oplib.bc_versions import V2, register

LIB = register(V2)
