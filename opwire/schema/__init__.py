"""The IDL and everything derived from it: generated models, the IDL description, the op-schema table."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from opwire._lazy import submodule_getattr

if TYPE_CHECKING:
    from opwire.schema.models import RECORDS_VERSION, SCHEMA, SCHEMA_VERSION

__all__ = ["RECORDS_VERSION", "SCHEMA", "SCHEMA_VERSION"]

_submodule = submodule_getattr(__name__, __path__)  # `opwire.schema.diff` without importing it first


def __getattr__(name: str) -> Any:
    """The versions and the IDL description from the generated models (imported on first use: `schema diff`
    reads IDL files and needs no model), and the public submodules."""
    if name in __all__:
        from opwire.schema import models

        return getattr(models, name)
    return _submodule(name)
