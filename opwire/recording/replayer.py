"""`opwire.replay`: run a recorded trace through the proxy executor and report every difference.

isolated: each call gets its inputs from the recorded payloads (a difference stays with the call that
made it); chained: inputs come from earlier replayed outputs, with the recorded aliasing (a difference
propagates, as it would in the program). Outputs and in-place-written arguments are compared: integer
and bool tensors exactly, floating ones within rtol/atol, dtype, shape and strides always.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch

from opwire.errors import BindError, OpwireError
from opwire.proxy_executor.budgets import check_time, time_limit
from opwire.proxy_executor.executor import ProxyExecutor
from opwire.proxy_executor.policy import DefaultPolicy
from opwire.proxy_executor.safety import ExecPolicy
from opwire.proxy_executor.targets import resolve
from opwire.recording.compare import Difference, compare_scalar, compare_tensor
from opwire.recording.mode import object_of
from opwire.recording.recorder import Trace, load_trace
from opwire.recording.replay_nodes import NodeShapes
from opwire.schema import models as m
from opwire.schema.refs import tensor_names
from opwire.serde import tensors as _tensors

__all__ = ["Mismatch", "ReplayReport", "SchemaDrift", "replay", "schema_drift"]


@dataclass(frozen=True)
class Mismatch:
    """One difference: call index, op, which output, kind, largest difference and where."""

    index: int
    op: str
    output: str  # "output 0" or "argument self (written in place)"
    kind: str  # "shape" | "dtype" | "stride" | "value" | "missing" | "error"
    detail: str
    max_diff: float | None = None
    where: tuple[int, ...] | None = None

    def __str__(self) -> str:
        return f"call {self.index} {self.op} {self.output}: {self.kind} mismatch: {self.detail}"


@dataclass(frozen=True)
class SchemaDrift:
    """An op whose schema in the running torch differs from the one recorded (current None: not loaded)."""

    op: str
    recorded: str
    current: str | None

    def __str__(self) -> str:
        now = self.current if self.current is not None else "not registered in this process"
        return f"{self.op}: recorded {self.recorded!r}, now {now!r}"


@dataclass
class ReplayReport:
    """What a replay found: mismatches, skipped calls and op-schema drift."""

    mode: str
    calls: int
    replayed: int = 0
    mismatches: list[Mismatch] = field(default_factory=list)
    skipped: list[tuple[int, str, str]] = field(default_factory=list)
    schema_drift: list[SchemaDrift] = field(default_factory=list)
    recorded_torch: str = ""
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """True when every replayed call matched."""
        return not self.mismatches

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form of the report."""
        d = asdict(self)
        d["ok"] = self.ok
        d["torch_version"] = str(torch.__version__)
        return d

    def __str__(self) -> str:
        lines = [
            f"replayed {self.replayed} of {self.calls} calls ({self.mode}) in {self.seconds:.2f}s: "
            f"{len(self.mismatches)} mismatch(es), {len(self.skipped)} skipped, "
            f"{len(self.schema_drift)} op schema(s) drifted (recorded with torch {self.recorded_torch}, "
            f"running {torch.__version__})"
        ]
        lines += [f"  drift: {d}" for d in self.schema_drift]
        lines += [f"  {x}" for x in self.mismatches]
        lines += [f"  skipped call {i} {op}: {why}" for i, op, why in self.skipped]
        return "\n".join(lines)


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
    rtol: float = 1e-5,
    atol: float = 1e-6,
    device: str | torch.device | None = None,
    progress: bool | None = None,
    *,
    allow_ops: Iterable[str] = (),
    timeout: float | None = None,
) -> ReplayReport:
    """Replay every recorded call and compare its outputs with the recorded ones.

    Ops the execution policy refuses (docs/executor.md) are a BindError before any call runs, unless
    `allow_ops` names them; `timeout` (seconds, checked between calls) is a BudgetError past it.
    """
    if mode not in ("isolated", "chained"):
        raise ValueError(f"mode must be 'isolated' or 'chained', got {mode!r}")
    model = _model(trace)
    exec_policy = ExecPolicy(allow_ops, timeout=timeout)
    _check_policy(model, exec_policy)
    report = ReplayReport(mode, len(model.records), recorded_torch=model.header.torch_version)
    report.schema_drift = schema_drift(model.header)
    runner = _Replayer(model, ProxyExecutor(policy=policy, exec_policy=exec_policy), mode, rtol, atol, device)
    start = time.perf_counter()
    show = sys.stderr.isatty() and len(model.records) >= 200 if progress is None else progress
    with torch.no_grad(), time_limit(timeout):
        for i, rec in _progress(model.records, show):
            check_time(f"call {i} ({rec.target})")
            if "skipped" in rec.metadata:
                report.skipped.append((i, rec.target, rec.metadata["skipped"]))
                continue
            report.mismatches += runner.run(i, rec)
            report.replayed += 1
    report.seconds = time.perf_counter() - start
    return report


def _check_policy(model: m.CallTrace, exec_policy: ExecPolicy) -> None:
    """Refuse the trace before anything runs when a call (or an `as_operator` argument) names a refused op."""
    seen: set[str] = set()
    for i, rec in enumerate(model.records):
        names = [rec.target, *(na.arg.value for na in rec.inputs if na.arg.type == "as_operator")]
        for name in names:
            if name not in seen:
                exec_policy.check_name(name, f"call {i} ({rec.target})")
                seen.add(name)


def _model(trace: Trace | m.CallTrace | str | Path) -> m.CallTrace:
    if isinstance(trace, str | Path):
        return load_trace(trace).model
    if isinstance(trace, Trace):
        return trace.model
    if isinstance(trace, m.CallTrace):
        return trace
    raise TypeError(f"expected an opwire.Trace, a CallTrace model or a path, got {type(trace).__name__}")


def _progress(records: list[m.CallRecord], show: bool) -> Iterator[tuple[int, m.CallRecord]]:
    n = len(records)
    step = max(n // 100, 1)
    for i, rec in enumerate(records):
        if show and i % step == 0:
            print(f"\rreplaying {i}/{n} [{'#' * (30 * i // n):<30}]", end="", file=sys.stderr, flush=True)
        yield i, rec
    if show:
        print(f"\rreplayed {n}/{n} [{'#' * 30}]", file=sys.stderr)


class _Replayer:
    """Runs one record at a time, keeping the live tensors of a chained replay."""

    def __init__(self, model: m.CallTrace, ex: ProxyExecutor, mode: str, rtol: float, atol: float, device: Any) -> None:
        self.model, self.ex, self.mode, self.rtol, self.atol, self.device = model, ex, mode, rtol, atol, device
        self.live: dict[str, torch.Tensor] = {}  # tensor object -> replayed tensor (chained)
        self._nondet: dict[str, bool] = {}
        self.shapes = NodeShapes()
        self._payloads: dict[str, torch.Tensor] = {}
        self._cached_bytes = 0

    def _payload(self, name: str) -> torch.Tensor:
        """The recorded value of `name`, rebuilt once and shared by every read-only use (bounded cache)."""
        t = self._payloads.get(name)
        if t is None:
            tv = self.model.tensors.get(name)
            if tv is None:
                raise BindError(f"the trace names tensor {name!r} but its tensor table has no entry for it")
            t = _tensors.to_tensor(tv, self.device, f"tensors[{name!r}]")
            self._cached_bytes += len(tv.data)
            if self._cached_bytes > _CACHE_BYTES:
                self._payloads.clear()
                self._cached_bytes = len(tv.data)
            self._payloads[name] = t
        return t

    def _tensor(self, name: str, written: bool) -> torch.Tensor:
        """An input: the live replayed tensor (chained) or the recorded payload (a copy when the call writes it)."""
        if self.mode == "chained":
            live = self.live.get(object_of(name))
            if live is None:
                live = self.live[object_of(name)] = _copy(self._payload(name))
            return live
        t = self._payload(name)
        return _copy(t) if written else t

    def run(self, i: int, rec: m.CallRecord) -> list[Mismatch]:
        shape = self.shapes.get(rec)
        in_names = [n for na in rec.inputs for n in tensor_names(na.arg)]
        written = json.loads(rec.metadata["mutated"]) if "mutated" in rec.metadata else {}
        by_arg = {na.name: tensor_names(na.arg) for na in rec.inputs} if written else {}
        dirty = {n for a in written for n in by_arg.get(a, [])}
        try:
            given = {n: self._tensor(n, n in dirty) for n in in_names}
            out = self.ex.call(shape.node, {f"#i{k}": given[n] for k, n in enumerate(in_names)})
        except OpwireError as exc:
            return [Mismatch(i, rec.target, "call", "error", f"{type(exc).__name__}: {exc}")]
        found: list[Mismatch] = []
        compare_values = not self._nondeterministic(rec.target)
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
        want = self.model.tensors.get(name)
        if want is None or want.digest is not None:
            return  # digest traces keep no bytes: the replayed value has to do
        recorded = self._payload(name)
        if live is None:
            self.live[object_of(name)] = _copy(recorded)
        elif live.shape == recorded.shape and live.dtype == recorded.dtype:
            live.copy_(recorded)

    def _check(self, i: int, rec: m.CallRecord, label: str, got: Any, name: str, values: bool) -> list[Mismatch]:
        want = self.model.tensors.get(name)
        if want is None:
            return [Mismatch(i, rec.target, label, "missing", f"the trace has no payload for {name!r}")]
        try:
            diff = compare_tensor(got, want, self.rtol, self.atol, values, lambda: self._payload(name))
        except OpwireError as exc:
            return [Mismatch(i, rec.target, label, "missing", f"the recorded payload is unreadable: {exc}")]
        return self._found(i, rec, label, diff)

    @staticmethod
    def _found(i: int, rec: m.CallRecord, label: str, diff: Difference | None) -> list[Mismatch]:
        if diff is None:
            return []
        return [Mismatch(i, rec.target, label, diff.kind, diff.detail, diff.max_diff, diff.where)]

    def _nondeterministic(self, target: str) -> bool:
        """Ops whose output values are not reproducible (random, uninitialized memory): compare metadata only."""
        hit = self._nondet.get(target)
        if hit is None:
            try:
                fn = resolve(target).fn
                tags = getattr(fn, "tags", ())
                hit = torch.Tag.nondeterministic_seeded in tags or "empty" in target.partition("::")[2].split(".")[0]
            except OpwireError:
                hit = False
            self._nondet[target] = hit
        return hit


_CACHE_BYTES = 512 << 20
"""Rebuilt payloads kept for reuse during one replay (cleared when they exceed this many bytes)."""


def _copy(t: torch.Tensor) -> torch.Tensor:
    """A copy with the same strides and storage offset (a call may write to it)."""
    storage = t.untyped_storage()
    out = torch.empty(0, dtype=t.dtype, device=t.device)
    out.set_(storage.clone(), t.storage_offset(), t.shape, t.stride())  # type: ignore[no-untyped-call]
    return out.requires_grad_(t.requires_grad)
