"""Deprecated: `opwire.schema.specs` moved to `opwire.schema.spec_roles`."""

from opwire._lazy import moved_module

moved_module(__name__, "opwire.schema.spec_roles")
