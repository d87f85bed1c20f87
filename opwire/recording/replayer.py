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
import json
import time
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch

from opwire.errors import BindError, OpwireError
from opwire.proxy_executor.budgets import MAX_MEMORY, check_time, time_limit
from opwire.proxy_executor.executor import ProxyExecutor
from opwire.proxy_executor.guard import RunGuard
from opwire.proxy_executor.policy import DefaultPolicy
from opwire.proxy_executor.safety import ExecPolicy
from opwire.proxy_executor.targets import resolve
from opwire.recording.compare import Difference, Errors, compare_scalar, compare_tensor, reproducible
from opwire.recording.mode import object_of
from opwire.recording.progress import Progress
from opwire.recording.recorder import Trace, load_trace
from opwire.recording.replay_nodes import NodeShapes
from opwire.recording.report import Mismatch, OpStats, ReplayReport, SchemaDrift
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
    _check_policy(src, exec_policy)
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
        opts = _Options(policy, mode, rtol, atol, device, exec_policy)
        if report.workers > 1:
            _parallel(tr, report, policy, rtol, atol, device, bar, exec_policy, max_memory if isolate else None)
        elif isolate:
            from opwire.proxy_executor.isolate_program import api_limits
            from opwire.recording.replay_isolated import replay_in_child

            limits = api_limits(max_memory, timeout)
            replay_in_child(src, report, lambda s, part: _run(s, part, opts, 0, len(s), _quiet()), limits)
            bar.update(len(src))
        else:
            _run(src, report, opts, 0, len(src), bar)
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


def _check_policy(src: TraceSource, exec_policy: ExecPolicy) -> None:
    """Refuse the trace before anything runs when a call (or an `as_operator` argument) names a refused op."""
    seen: set[str] = set()
    for i, rec in enumerate(src.records(0, len(src))):
        if "skipped" in rec.metadata:
            continue  # never executed
        names = [rec.target, *(na.arg.value for na in rec.inputs if na.arg.type == "as_operator")]
        for name in names:
            if name not in seen:
                exec_policy.check_name(name, f"call {i} ({rec.target})")
                seen.add(name)


def _trace(trace: Trace | m.CallTrace | str | Path) -> Trace:
    if isinstance(trace, str | Path):
        return load_trace(trace)
    if isinstance(trace, Trace):
        return trace
    if isinstance(trace, m.CallTrace):
        return Trace(trace)
    raise TypeError(f"expected an opwire.Trace, a CallTrace model or a path, got {type(trace).__name__}")


@dataclass(frozen=True)
class _Options:
    policy: DefaultPolicy
    mode: str
    rtol: float | None
    atol: float | None
    device: Any
    exec_policy: ExecPolicy


def _run(src: TraceSource, report: ReplayReport, opts: _Options, start: int, stop: int, bar: Progress) -> None:
    """Replay records start..stop of `src` into `report` (records are read one at a time)."""
    runner = _Replayer(src, ProxyExecutor(policy=opts.policy, exec_policy=opts.exec_policy), opts)
    runner.free(-1)
    with RunGuard("replay"), torch.no_grad(), time_limit(opts.exec_policy.timeout):
        for i, rec in enumerate(src.records(start, stop), start):
            check_time(f"call {i} ({rec.target})")
            if "skipped" in rec.metadata:
                report.skipped.append((i, rec.target, rec.metadata["skipped"]))
            else:
                stats = report.ops.setdefault(rec.target, OpStats())
                found = runner.run(i, rec)
                stats.calls += 1
                stats.mismatches += bool(found)
                stats.worst_abs = max(stats.worst_abs, runner.errors.abs)
                stats.worst_rel = max(stats.worst_rel, runner.errors.rel)
                report.mismatches += found
                report.replayed += 1
            runner.free(i)
            bar.update()


def _parallel(
    tr: Trace, report: ReplayReport, policy: DefaultPolicy, rtol: float | None, atol: float | None, device: Any,
    bar: Progress, exec_policy: ExecPolicy, sandbox: int | None = None,
) -> None:  # fmt: skip
    """Isolated replay over `report.workers` fresh processes, each a contiguous range; merged in call order."""
    import os
    import subprocess
    import sys

    from opwire.recording.replay_worker import report_from_json, spec

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
            if proc.returncode != 0:
                last = err.decode(errors="replace").strip().splitlines()[-1:] or ["no message"]
                raise OpwireError(f"replay worker for calls {a}..{b - 1} failed (exit {proc.returncode}): {last[0]}")
            report.merge(report_from_json(out, f"replay worker for calls {a}..{b - 1}"))
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
                producer[n] = f"output {j} of call {i} {rec.target}" + _at(rec)
        if "mutated" in rec.metadata:
            for arg_name, names in json.loads(rec.metadata["mutated"]).items():
                for n in names:
                    producer[n] = f"argument {arg_name} written in place by call {i} {rec.target}" + _at(rec)
    report.mismatches = [dataclasses.replace(x, inputs=lines.get(x.index, ())) for x in report.mismatches]


def _at(rec: m.CallRecord) -> str:
    where = rec.metadata.get("source", "")
    return f" ({where})" if where else ""


class _Replayer:
    """Runs one record at a time, keeping the live tensors of a chained replay (let go when freed)."""

    def __init__(self, src: TraceSource, ex: ProxyExecutor, opts: _Options) -> None:
        self.src, self.ex, self.mode = src, ex, opts.mode
        self.rtol, self.atol, self.device = opts.rtol, opts.atol, opts.device
        self.live: dict[str, torch.Tensor] = {}  # tensor object -> replayed tensor (chained)
        self.shapes = NodeShapes()
        self._payloads: OrderedDict[str, torch.Tensor] = OrderedDict()
        self._cached_bytes = 0
        self.errors = Errors()

    def free(self, i: int) -> None:
        """Chained replay: drop the objects the program let go of after record `i`."""
        if self.mode == "chained":
            for obj in self.src.freed_after(i):
                self.live.pop(obj, None)

    def _payload(self, name: str) -> torch.Tensor:
        """The recorded value of `name`, rebuilt once and shared by every read-only use (bounded LRU cache)."""
        t = self._payloads.get(name)
        if t is not None:
            self._payloads.move_to_end(name)
            return t
        if self.src.meta(name) is None:
            raise BindError(f"the trace names tensor {name!r} but its tensor table has no entry for it")
        t = self.src.load(name, self.device)
        size = self.src.nbytes(name)
        while self._payloads and self._cached_bytes + size > _CACHE_BYTES:
            _, old = self._payloads.popitem(last=False)
            self._cached_bytes -= old.untyped_storage().nbytes()
        if size <= _CACHE_BYTES:
            self._payloads[name] = t
            self._cached_bytes += t.untyped_storage().nbytes()
        return t

    def _tensor(self, name: str, written: bool) -> torch.Tensor:
        """An input: the live replayed tensor (chained) or the recorded payload (a copy when the call writes it)."""
        if self.mode == "chained":
            live = self.live.get(object_of(name))
            if live is None:
                live = self.live[object_of(name)] = self._fresh(name)
            return live
        t = self._payload(name)
        return _copy(t) if written else t

    def _fresh(self, name: str) -> torch.Tensor:
        """A tensor of its own holding the recorded value (no cached copy kept beside it)."""
        cached = self._payloads.get(name)
        if cached is not None:
            return _copy(cached)
        if self.src.meta(name) is None:
            raise BindError(f"the trace names tensor {name!r} but its tensor table has no entry for it")
        return self.src.load(name, self.device)

    def run(self, i: int, rec: m.CallRecord) -> list[Mismatch]:
        """Replay record `i`; its mismatches (self.errors: the largest differences seen in it)."""
        self.errors = Errors()
        shape = self.shapes.get(rec)
        in_names = [n for na in rec.inputs for n in tensor_names(na.arg)]
        written = json.loads(rec.metadata["mutated"]) if "mutated" in rec.metadata else {}
        by_arg = {na.name: tensor_names(na.arg) for na in rec.inputs} if written else {}
        dirty = {n for a in written for n in by_arg.get(a, [])}
        try:
            given = {n: self._tensor(n, n in dirty) for n in in_names}
            out = self.ex.call(shape.node, {f"#i{k}": given[n] for k, n in enumerate(in_names)})
        except OpwireError as exc:
            return self._found(i, rec, "call", Difference("error", f"{type(exc).__name__}: {exc}"))
        found: list[Mismatch] = []
        compare_values = reproducible(rec.target, rec.metadata)
        k = 0
        for j, arg in enumerate(rec.outputs):
            label = f"output {j}"
            if j in shape.scalar_outputs:
                found += self._found(i, rec, label, compare_scalar(out.get(f"#s{j}"), arg.value, self.rtol, self.atol))
                continue
            names = tensor_names(arg)
            for e, n in enumerate(names):
                got = out.get(f"#o{k}")
                k += 1
                if self.mode == "chained" and isinstance(got, torch.Tensor):
                    self.live[object_of(n)] = got
                where = label if arg.type == "as_tensor" else f"{label}[{e}]"
                found += self._check(i, rec, where, got, n, compare_values)
        for arg_name, new_names in written.items():
            for before, after in zip(by_arg.get(arg_name, []), new_names, strict=False):
                label = f"argument {arg_name} (written in place)"
                found += self._check(i, rec, label, given.get(before), after, compare_values)
                if self.mode == "chained" and not compare_values:
                    self._adopt(after, given.get(before))
        if self.mode == "chained" and not compare_values:
            for arg in rec.outputs:
                for n in tensor_names(arg):
                    self._adopt(n, None)
        return found

    def _adopt(self, name: str, live: torch.Tensor | None) -> None:
        """Chained replay: continue from the recorded value of a nondeterministic op (random numbers, fresh
        `empty` memory), which no replay reproduces; in place into `live` so its views see it too."""
        want = self.src.meta(name)
        if want is None or (want.digest is not None and not self.src.nbytes(name) and not want.data):
            return  # digest traces keep no bytes: the replayed value has to do
        recorded = self._payload(name)
        if live is None:
            self.live[object_of(name)] = _copy(recorded)  # `recorded` is cached: the live value needs its own
        elif live.shape == recorded.shape and live.dtype == recorded.dtype:
            live.copy_(recorded)

    def _check(self, i: int, rec: m.CallRecord, label: str, got: Any, name: str, values: bool) -> list[Mismatch]:
        want = self.src.meta(name)
        if want is None:
            return self._found(i, rec, label, Difference("missing", f"the trace has no payload for {name!r}"))
        try:
            diff = compare_tensor(got, want, self.rtol, self.atol, values, lambda: self._payload(name), self.errors)
        except OpwireError as exc:
            diff = Difference("missing", f"the recorded payload is unreadable: {exc}")
        return self._found(i, rec, label, diff)

    @staticmethod
    def _found(i: int, rec: m.CallRecord, label: str, diff: Difference | None) -> list[Mismatch]:
        if diff is None:
            return []
        source, module = rec.metadata.get("source", ""), rec.metadata.get("module", "")
        return [
            Mismatch(
                i, rec.target, label, diff.kind, diff.detail, diff.max_diff, diff.where, diff.max_rel, source, module
            )
        ]


_CACHE_BYTES = 96 << 20
"""Rebuilt payloads kept for reuse during one replay (least recently used dropped beyond this many bytes)."""


def _copy(t: torch.Tensor) -> torch.Tensor:
    """A copy with the same strides and storage offset (a call may write to it)."""
    storage = t.untyped_storage()
    out = torch.empty(0, dtype=t.dtype, device=t.device)
    out.set_(storage.clone(), t.storage_offset(), t.shape, t.stride())  # type: ignore[no-untyped-call]
    return out.requires_grad_(t.requires_grad)


def _budgets_of(tr: Trace, temporary: bool) -> dict[str, int]:
    """The decoding budgets a streamed trace was opened with; none for a file opwire just wrote from memory."""
    import sys

    reader = getattr(getattr(tr, "_source", None), "reader", None)
    if temporary or reader is None:
        return {"max_elements": sys.maxsize, "max_bytes": sys.maxsize}
    return {"max_elements": reader.max_elements, "max_bytes": reader.max_bytes}
