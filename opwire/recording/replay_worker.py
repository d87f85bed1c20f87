"""One process of `opwire.replay(..., workers=N)`: `python -m opwire.recording.replay_worker SPEC_JSON`.

The parent starts each worker as a fresh interpreter (never re-running the caller's `__main__`), passes
the streamed trace, the record range and the options as JSON, and reads from stdout the one `IsolatedResult`
record (opwire.thrift) a sandboxed child sends too (`proxy_executor.isolate_result`): the partial report as a
`ReplayWorkerReport`, or the error that stopped the worker. Op libraries the parent loaded with
`torch.ops.load_library` are loaded first.
"""

from __future__ import annotations

import json as _stdlib_json
import sys
from dataclasses import asdict
from typing import Any

import torch

from opwire.proxy_executor.default_policy import DefaultPolicy
from opwire.proxy_executor.exec_policy import ExecPolicy
from opwire.proxy_executor.isolate_result import encode_result, error_record
from opwire.proxy_executor.run_budgets import MAX_MEMORY
from opwire.proxy_executor.sandbox import Limits, enter, lock_reads
from opwire.recording.progress import Progress
from opwire.recording.replay_engine import ReplayOptions, run_range
from opwire.recording.report import Mismatch, OpStats, ReplayReport, Span, mismatch_model, span_models
from opwire.recording.source import StreamSource
from opwire.schema import models as m
from opwire.serde import json

__all__ = ["main", "report_from_dict", "report_from_json", "report_from_model", "spec", "worker_report"]


def spec(path: str, start: int, stop: int, opts: dict[str, Any], threads: int) -> str:
    """The JSON a worker is started with."""
    libraries = sorted(getattr(torch.ops, "loaded_libraries", ()))
    return _stdlib_json.dumps(
        {"path": path, "start": start, "stop": stop, "opts": opts, "threads": threads, "libraries": libraries}
    )


def worker_report(part: ReplayReport) -> m.ReplayWorkerReport:
    """A partial report as the IDL's `ReplayWorkerReport` record (what a worker or a rank hands its parent)."""
    return m.ReplayWorkerReport(
        mode=part.mode,
        calls=part.calls,
        replayed=part.replayed,
        mismatches=[mismatch_model(x) for x in part.mismatches],
        skipped=[m.ReplaySkip(index=i, op=op, reason=why) for i, op, why in part.skipped],
        ops={op: m.ReplayOpStats(**asdict(s)) for op, s in part.ops.items()},
        seconds=part.seconds,
        spans=span_models(part.spans),
    )


def report_from_model(r: m.ReplayWorkerReport) -> ReplayReport:
    """A partial report from its `ReplayWorkerReport` record."""
    part = ReplayReport(r.mode, r.calls, replayed=r.replayed, seconds=r.seconds)
    part.mismatches = [
        Mismatch(
            x.index,
            x.op,
            x.output,
            x.kind,
            x.detail,
            x.max_diff,
            tuple(x.where) if x.where is not None else None,
            x.max_rel,
            x.source,
            x.module_path,
            tuple(x.inputs),
        )
        for x in r.mismatches
    ]
    part.skipped = [(s.index, s.op, s.reason) for s in r.skipped]
    part.ops = {op: OpStats(s.calls, s.mismatches, s.worst_abs, s.worst_rel) for op, s in r.ops.items()}
    part.spans = None if r.spans is None else [Span(s.start, s.stop, s.seconds) for s in r.spans]
    return part


def report_from_json(data: bytes | str, source: str = "replay worker") -> ReplayReport:
    """A partial report read back from a worker's JSON (opwire's JSON codec: anything else is a DecodeError)."""
    return report_from_model(json.decode(data, m.ReplayWorkerReport, source=source))


def report_from_dict(d: dict[str, Any]) -> ReplayReport:
    """A partial report from the JSON-ready form of its record (`to_jsonable(worker_report(part))`)."""
    return report_from_json(_stdlib_json.dumps(d))


def main(argv: list[str] | None = None) -> int:
    """Run one worker: replay the range and write its `IsolatedResult` (the partial report, or the error) to stdout."""
    args = _stdlib_json.loads((argv if argv is not None else sys.argv[1:])[0])
    label = f"calls {args['start']}..{int(args['stop']) - 1}"
    try:
        result = encode_result(_replay(args))
    except Exception as exc:  # said in the record; a crash or a limit is the worker's exit status
        result = encode_result(error_record(exc, label, None))
    sys.stdout.buffer.write(result)
    sys.stdout.flush()
    return 0


def _replay(args: dict[str, Any]) -> m.ReplayWorkerReport:
    """Replay the range `args` names and return the partial report."""
    for lib in args["libraries"]:
        torch.ops.load_library(lib)  # type: ignore[no-untyped-call]
    torch.set_num_threads(int(args["threads"]))
    o = args["opts"]
    exec_policy = ExecPolicy(
        o.get("allow_ops", ()), timeout=o.get("timeout"), max_memory=o.get("max_memory", MAX_MEMORY)
    )
    opts = ReplayOptions(DefaultPolicy(o["policy"]), "isolated", o["rtol"], o["atol"], o["device"], exec_policy)
    if o.get("sandbox") is not None:  # one thread still: Landlock covers every thread this worker starts
        lock_reads([args["path"]])
    src = StreamSource(args["path"], max_elements=o.get("max_elements"), max_bytes=o.get("max_bytes"))
    part = ReplayReport("isolated", len(src))
    if o.get("sandbox") is not None:
        enter(Limits(max_memory=int(o["sandbox"]), timeout=o.get("timeout")))
    try:
        run_range(src, part, opts, int(args["start"]), int(args["stop"]), Progress("", enabled=False))
    finally:
        src.close()
    return worker_report(part)


if __name__ == "__main__":
    sys.exit(main())
