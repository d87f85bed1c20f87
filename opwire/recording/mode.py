"""Deprecated: `opwire.recording.mode` moved to `opwire.recording.dispatch_mode`."""

from opwire._lazy import moved_module

moved_module(__name__, "opwire.recording.dispatch_mode")
