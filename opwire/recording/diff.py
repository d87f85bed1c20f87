"""Deprecated: `opwire.recording.diff` moved to `opwire.recording.trace_diff`."""

from opwire._lazy import moved_module

moved_module(__name__, "opwire.recording.trace_diff")
