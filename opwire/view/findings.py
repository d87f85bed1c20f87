"""Deprecated: `opwire.view.findings` moved to `opwire.view.overlays`."""

from opwire._lazy import moved_module

moved_module(__name__, "opwire.view.overlays")
