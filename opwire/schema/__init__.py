"""The IDL and everything derived from it: generated models, the IDL description, the op-schema table."""

from __future__ import annotations

from opwire._lazy import submodule_getattr
from opwire.schema.models import RECORDS_VERSION, SCHEMA, SCHEMA_VERSION

__all__ = ["RECORDS_VERSION", "SCHEMA", "SCHEMA_VERSION"]

__getattr__ = submodule_getattr(__name__, __path__)  # `opwire.schema.diff` without importing it first
