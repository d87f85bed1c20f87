"""Record the operator calls of eager code, replay them through the proxy executor, compare the results.

The names that need torch load on first use; reading a streamed trace (`stream_reader.TraceReader`, what
`opwire inspect` does) needs none.

Modules:
    aliases: which recorded tensor objects a chained replay holds as views of one another
    align: two call sequences aligned as a diff tool does (prefix, suffix, anchors, minimal edit script)
    arguments: Python values of a live dispatcher call to `Argument`s, the member picked from the schema/ops.py table
    collective_capture: recording one c10d call: process groups and reductions as references, results read when done
    collectives: the collectives opwire records, replays and checks across ranks: one row per op, its `Kind`
    compare: a replayed value against what the trace recorded: dtype, shape, strides, then values or digests
    coverage_writes: which bytes of a storage a write covers (a strided view's elements, an indexed write's positions)
    definedness: which recorded values have defined content, and which were written where no dispatch mode sees
    diff_frames: `FrameCalls`: two streamed traces compared from their frame bytes, models built only where they differ
    dispatch_mode: `RecorderMode`, the dispatch mode behind `record`: one `CallRecord` per dispatcher call
    distributed: run directories (one trace per rank): `opwire ranks`, replay and diff; a client of the modules here
    frame_index: part of a streamed trace's index handed to processes that read its tensors without scanning it
    frames: a streamed trace read without a model per frame (what `opwire ranks` and `opwire diff` use)
    launch: a rank's place in a distributed run, read from the launcher's environment (`RANK`, `WORLD_SIZE`)
    locate: where a recorded call comes from: the first Python frame outside torch and opwire, and its `nn.Module`
    mutations: the `mutated` metadata of a recorded call: which arguments its kernel wrote in place
    origin: local or inherited: does a call that differs between two runs disagree itself, or only its inputs?
    pair_compare: one aligned pair of calls of two traces compared, arguments by value, outputs by payload
    payloads: tensor payloads of a trace: full TensorValues, digests, the storage spans of streamed traces
    progress: a one-line progress bar on stderr, drawn only on a terminal
    recorder: `record`, `Trace` and `load_trace`
    replay_engine: one range of a trace's calls replayed into a report (shared by every way of replaying)
    replay_isolated: `replay(..., isolate=True)`: the replay runs in a sandboxed child, its report sent back as a record
    replay_nodes: records as executor nodes, shared between records of one shape so each binds once
    replay_worker: one process of `replay(..., workers=N)`
    replayer: `replay` and `ReplayReport`: a trace run through the proxy executor, every difference reported
    report: what a replay found, and the text `opwire replay` prints
    sinks: where the recorder puts what it sees: in memory (a `CallTrace`) or a streamed file
    source: one read interface over both trace forms: records, tensor metadata, tensors on demand, the files it reads
    storages: storage identity, and storages whose memory was replaced where no dispatch mode sees
    stream_frames: the streamed trace format: frame kinds, the frame header, sniffing a file's first bytes
    stream_inspect: `stream_summary`: what `opwire inspect` says of a streamed trace, from its frame index
    stream_reader: `TraceReader`: a streamed trace indexed on open, records and payloads read on demand
    stream_writer: `TraceWriter`: frames written as the calls happen, payloads hashed by a writer thread
    subclasses: tensor subclasses recorded through: wrappers run their ops on plain tensors, fakes have no values
    tensor_names: how a recording names tensor values (`t<N>`, `t<N>.<k>`) and the objects the program frees
    trace_diff: `diff_traces`: two recordings of the same code aligned call by call, and what differs
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from opwire._lazy import lazy_getattr, lazy_names

# public name -> module that defines it, imported on first use: each imports torch, and reading a streamed
# trace (`stream_reader.TraceReader`, what `opwire inspect` does) needs none
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
    "stream_summary": "opwire.recording.stream_inspect",
    "launch_info": "opwire.recording.launch",
    "rank_file": "opwire.recording.launch",
}

if TYPE_CHECKING:  # what mypy and IDEs see for the lazy names
    from opwire.recording.launch import launch_info as launch_info
    from opwire.recording.launch import rank_file as rank_file
    from opwire.recording.recorder import Trace as Trace
    from opwire.recording.recorder import load_trace as load_trace
    from opwire.recording.recorder import record as record
    from opwire.recording.replayer import Mismatch as Mismatch
    from opwire.recording.replayer import ReplayReport as ReplayReport
    from opwire.recording.replayer import SchemaDrift as SchemaDrift
    from opwire.recording.replayer import replay as replay
    from opwire.recording.stream_inspect import stream_summary as stream_summary
    from opwire.recording.trace_diff import TraceDiff as TraceDiff
    from opwire.recording.trace_diff import diff_traces as diff_traces

__all__ = lazy_names(_LAZY, ())

__getattr__ = lazy_getattr(__name__, __path__, _LAZY)  # also `opwire.recording.<submodule>` without importing it first
