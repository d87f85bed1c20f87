"""Record the operator calls of eager code, replay them through the proxy executor, compare the results.

`recorder` (record, Trace, load_trace), `mode` (the dispatch mode that sees each call), `arguments`
(Python values -> serialized arguments), `payloads` (tensor bytes and digests of a trace), `replayer`
(replay), `report` (ReplayReport and its text), `compare` (tensor and scalar comparison), `replay_nodes`
(trace records as nodes), `stream` (the streamed trace format), `source` (one read interface over both
trace forms), `sinks` (where the recorder writes), `locate` (source lines and module names), `diff`
(trace against trace), `progress` (the terminal progress bar), `replay_worker` (a parallel replay process),
`distributed` (runs under torchrun: one trace per rank, `opwire ranks`, replay and diff of run directories).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from opwire._lazy import lazy_getattr

# public name -> module that defines it, imported on first use: each imports torch, and reading a streamed
# trace (`stream.TraceReader`, what `opwire inspect` does) needs none
_LAZY = {
    "Trace": "opwire.recording.recorder",
    "load_trace": "opwire.recording.recorder",
    "record": "opwire.recording.recorder",
    "Mismatch": "opwire.recording.replayer",
    "ReplayReport": "opwire.recording.replayer",
    "SchemaDrift": "opwire.recording.replayer",
    "replay": "opwire.recording.replayer",
    "TraceDiff": "opwire.recording.trace_diff",
    "diff_traces": "opwire.recording.trace_diff",
}

if TYPE_CHECKING:  # what mypy and IDEs see for the lazy names
    from opwire.recording.recorder import Trace, load_trace, record
    from opwire.recording.replayer import Mismatch, ReplayReport, SchemaDrift, replay
    from opwire.recording.trace_diff import TraceDiff, diff_traces

__all__ = [
    "Mismatch",
    "ReplayReport",
    "SchemaDrift",
    "Trace",
    "TraceDiff",
    "diff_traces",
    "load_trace",
    "record",
    "replay",
]

__getattr__ = lazy_getattr(__name__, __path__, _LAZY)  # also `opwire.recording.<submodule>` without importing it first
