"""`opwire.replay`: run a recorded trace through the proxy executor and report every difference.

isolated: each call gets its inputs from the recorded payloads (a difference stays with the call that
made it); chained: inputs come from earlier replayed outputs, with the recorded aliasing (a difference
propagates, as it would in the program), and an object is let go when the program let go of it.
Outputs and in-place-written arguments are compared: integer and bool tensors exactly, floating ones
within rtol/atol (per dtype by default), dtype, shape and strides always. Records are read one at a
time, so a streamed trace is never loaded whole.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

import torch

from opwire.errors import OpwireError
from opwire.proxy_executor.default_policy import DefaultPolicy
from opwire.proxy_executor.exec_policy import ExecPolicy
from opwire.proxy_executor.isolate_program import api_limits
from opwire.proxy_executor.isolate_result import decode_result
from opwire.proxy_executor.run_budgets import MAX_MEMORY
from opwire.proxy_executor.targets import resolve
from opwire.recording.mutations import written_arguments
from opwire.recording.progress import Progress
from opwire.recording.recorder import Trace, load_trace
from opwire.recording.replay_engine import ReplayOptions, check_policy, recorded_at, run_range
from opwire.recording.replay_isolated import replay_in_child
from opwire.recording.replay_worker import report_from_model, spec
from opwire.recording.report import Mismatch, ReplayReport, SchemaDrift
from opwire.recording.source import TraceSource
from opwire.schema import models as m
from opwire.schema.refs import tensor_names

__all__ = ["Mismatch", "ReplayReport", "SchemaDrift", "replay", "schema_drift"]


def schema_drift(header: m.TraceHeader) -> list[SchemaDrift]:
    """Ops whose registered schema differs from the recorded schema string (or that are not registered)."""
    out = []
    for op, recorded in header.op_schemas.items():
        try:
            target = resolve(op)
            current = target.schema.schema if target.schema is not None else None
        except OpwireError:
            current = None
        if current != recorded:
            out.append(SchemaDrift(op, recorded, current))
    return out


def replay(
    trace: Trace | m.CallTrace | str | Path,
    policy: DefaultPolicy | str = DefaultPolicy.FROM_SCHEMA,
    mode: Literal["isolated", "chained"] = "isolated",
    rtol: float | None = None,
    atol: float | None = None,
    device: str | torch.device | None = None,
    progress: bool | None = None,
    workers: int = 1,
    max_mismatches: int = 10,
    *,
    allow_ops: Iterable[str] = (),
    timeout: float | None = None,
    isolate: bool = False,
    max_memory: int = MAX_MEMORY,
) -> ReplayReport:
    """Replay every recorded call and compare its outputs with the recorded ones.

    `rtol`/`atol` of None take each dtype's default (float16 and bfloat16 looser than float32);
    `workers` > 1 splits an isolated replay over that many processes (the report is the same as with one);
    `max_mismatches` is how many mismatches `str(report)` lists (the report keeps them all).
    Ops the execution policy refuses (docs/executor.md) are a BindError before any call runs, unless
    `allow_ops` names them; `timeout` (seconds, checked between calls) is a BudgetError past it.
    `max_memory` is the execution-memory budget (bytes a call may allocate, checked before it runs).
    `isolate=True` replays in a sandboxed child (the same `max_memory` bounds its address space; no writes,
    exec or sockets; a crash is a KernelError naming the call); with `workers` > 1 each worker sandboxes itself.
    """
    if mode not in ("isolated", "chained"):
        raise ValueError(f"mode must be 'isolated' or 'chained', got {mode!r}")
    if not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a positive int, got {workers!r}")
    if workers > 1 and mode == "chained":
        raise ValueError(
            "a chained replay feeds each call from the ones before it and runs in one process; "
            "use workers=1 or mode='isolated'"
        )
    if isinstance(policy, str):
        policy = DefaultPolicy(policy)
    tr = _trace(trace)
    src = tr.source
    exec_policy = ExecPolicy(allow_ops, timeout=timeout, max_memory=max_memory)
    check_policy(src, exec_policy)
    report = ReplayReport(
        mode,
        len(src),
        recorded_torch=src.header.torch_version,
        cut=src.cut,
        tolerance=_tolerance_text(rtol, atol),
        max_mismatches=max_mismatches,
        workers=min(workers, max(len(src), 1)),
    )
    report.schema_drift = schema_drift(src.header)
    start = time.perf_counter()
    bar = Progress("replaying", len(src), enabled=progress if progress is not None else None)
    try:
        opts = ReplayOptions(policy, mode, rtol, atol, device, exec_policy)
        if report.workers > 1:
            _parallel(tr, report, policy, rtol, atol, device, bar, exec_policy, max_memory if isolate else None)
        elif isolate:
            limits = api_limits(max_memory, timeout)
            replay_in_child(src, report, lambda s, part: run_range(s, part, opts, 0, len(s), _quiet()), limits)
            bar.update(len(src))
        else:
            run_range(src, report, opts, 0, len(src), bar)
    finally:
        bar.close()
    _add_provenance(src, report)
    report.seconds = time.perf_counter() - start
    return report


def _quiet() -> Progress:
    return Progress("", enabled=False)


def _tolerance_text(rtol: float | None, atol: float | None) -> str:
    if rtol is None and atol is None:
        return "per dtype (float32 rtol=1e-05, atol=1e-06; float16 1e-03/1e-05; bfloat16 1.6e-02/1e-05)"
    shown = ["dtype default" if x is None else f"{x:g}" for x in (rtol, atol)]
    return f"rtol={shown[0]}, atol={shown[1]}"


def _trace(trace: Trace | m.CallTrace | str | Path) -> Trace:
    if isinstance(trace, str | Path):
        return load_trace(trace)
    if isinstance(trace, Trace):
        return trace
    if isinstance(trace, m.CallTrace):
        return Trace(trace)
    raise TypeError(f"expected an opwire.Trace, a CallTrace model or a path, got {type(trace).__name__}")


def _parallel(
    tr: Trace, report: ReplayReport, policy: DefaultPolicy, rtol: float | None, atol: float | None, device: Any,
    bar: Progress, exec_policy: ExecPolicy, sandbox: int | None = None,
) -> None:  # fmt: skip
    """Isolated replay over `report.workers` fresh processes, each a contiguous range; merged in call order."""
    import os
    import subprocess
    import sys

    path, temporary = tr.stream_path()
    n, k = report.calls, report.workers
    bounds = [(n * j // k, n * (j + 1) // k) for j in range(k)]
    threads = max(1, torch.get_num_threads() // k)
    opts = {
        "policy": policy.value,
        "rtol": rtol,
        "atol": atol,
        "device": None if device is None else str(device),
        "allow_ops": sorted(exec_policy.allow_ops),
        "timeout": exec_policy.timeout,
        "max_memory": exec_policy.max_memory,
        **_budgets_of(tr, temporary),  # workers reopen the file within the budgets the caller opened it with
        "sandbox": sandbox,  # max_memory of each worker's sandbox (None: no sandbox)
    }
    procs = []
    try:
        for a, b in bounds:
            cmd = [sys.executable, "-m", "opwire.recording.replay_worker", spec(str(path), a, b, opts, threads)]
            procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
        for (a, b), proc in zip(bounds, procs, strict=True):
            out, err = proc.communicate()
            if proc.returncode < 0:
                raise OpwireError(
                    f"replay worker for calls {a}..{b - 1} died of signal {-proc.returncode} (a kernel crashed or a "
                    "sandbox limit was hit); replay those calls with workers=1 to name the call"
                )
            if proc.returncode != 0 or not out:
                last = err.decode(errors="replace").strip().splitlines()[-1:] or ["no message"]
                raise OpwireError(f"replay worker for calls {a}..{b - 1} failed (exit {proc.returncode}): {last[0]}")
            sent = decode_result(out, f"replay worker for calls {a}..{b - 1}", running=True)
            report.merge(report_from_model(sent.report()))
            bar.update(b - a)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if temporary:
            os.unlink(path)


def _add_provenance(src: TraceSource, report: ReplayReport) -> None:
    """Name, for each mismatching call's tensor inputs, the earlier call that produced them."""
    if not report.mismatches:
        return
    wanted = {x.index for x in report.mismatches}
    last = max(wanted)
    producer: dict[str, str] = {}
    lines: dict[int, tuple[str, ...]] = {}
    for i, rec in enumerate(src.records(0, last + 1)):
        if i in wanted:
            lines[i] = tuple(
                f"{na.name} = {n}: {producer.get(n, 'a recorded input (no recorded call produced it)')}"
                for na in rec.inputs
                for n in tensor_names(na.arg)
            )
        for j, arg in enumerate(rec.outputs):
            for n in tensor_names(arg):
                producer[n] = f"output {j} of call {i} {rec.target}" + recorded_at(rec)
        for arg_name, names in written_arguments(rec, f"call {i} {rec.target}").items():
            for n in names:
                producer[n] = f"argument {arg_name} written in place by call {i} {rec.target}" + recorded_at(rec)
    report.mismatches = [dataclasses.replace(x, inputs=lines.get(x.index, ())) for x in report.mismatches]


def _budgets_of(tr: Trace, temporary: bool) -> dict[str, int]:
    """The decoding budgets a streamed trace was opened with; none for a file opwire just wrote from memory."""
    import sys

    reader = getattr(getattr(tr, "_source", None), "reader", None)
    if temporary or reader is None:
        return {"max_elements": sys.maxsize, "max_bytes": sys.maxsize}
    return {"max_elements": reader.max_elements, "max_bytes": reader.max_bytes}
