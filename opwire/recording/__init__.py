"""Record the operator calls of eager code, replay them through the proxy executor, compare the results.

`recorder` (record, Trace, load_trace), `mode` (the dispatch mode that sees each call), `arguments`
(Python values -> serialized arguments), `payloads` (tensor bytes and digests of a trace), `replayer`
(replay and its report), `compare` (tensor and scalar comparison), `replay_nodes` (trace records as nodes).
"""

from __future__ import annotations

from opwire.recording.recorder import Trace, load_trace, record
from opwire.recording.replayer import Mismatch, ReplayReport, SchemaDrift, replay

__all__ = ["Mismatch", "ReplayReport", "SchemaDrift", "Trace", "load_trace", "record", "replay"]
