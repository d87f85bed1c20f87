"""The replay engine: one range of a trace's calls replayed into a report, shared by `opwire.replay`, its
worker processes and the distributed replay (the replayer and the worker both import it, neither the other).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import torch

from opwire.errors import BindError, OpwireError, UnknownTargetError
from opwire.proxy_executor.default_policy import DefaultPolicy
from opwire.proxy_executor.exec_policy import ExecPolicy, refusals_collected
from opwire.proxy_executor.executor import ProxyExecutor
from opwire.proxy_executor.guard import RunGuard
from opwire.proxy_executor.run_budgets import check_time, time_limit
from opwire.proxy_executor.targets import resolve
from opwire.recording.compare import Difference, Errors, compare_scalar, compare_tensor, reproducible
from opwire.recording.definedness import EXTERNAL, metadata_names
from opwire.recording.mutations import written_arguments
from opwire.recording.payloads import ByteCheck
from opwire.recording.progress import Progress
from opwire.recording.replay_nodes import NodeShape, NodeShapes
from opwire.recording.report import Mismatch, OpStats, ReplayReport
from opwire.recording.source import TraceSource
from opwire.recording.tensor_names import object_of
from opwire.schema import models as m
from opwire.schema.refs import tensor_names

__all__ = ["CallWalk", "ReplayOptions", "Replayer", "check_policy", "recorded_at", "run_range"]


def check_policy(src: TraceSource, exec_policy: ExecPolicy) -> None:
    """Refuse the trace before anything runs when a call (or an `as_operator` argument) names a refused op, or
    an op this process has not loaded (a setup error: the recording's process had loaded its library)."""
    seen: set[str] = set()
    calls: list[tuple[str, str]] = []
    for i, rec in enumerate(src.records(0, len(src))):
        if "skipped" in rec.metadata:
            continue  # never executed
        names = [rec.target, *(na.arg.value for na in rec.inputs if na.arg.type == "as_operator")]
        for name in names:
            if name not in seen:
                _check_loaded(name, f"call {i} ({rec.target})")  # a setup error comes before any refusal
                calls.append((name, f"call {i} ({rec.target})"))
                seen.add(name)
    with refusals_collected():  # one BindError naming every refused op of the trace
        for name, where in calls:
            exec_policy.check_name(name, where)


def _check_loaded(name: str, where: str) -> None:
    """UnknownTargetError (a setup error) when op `name` ("ns::op.overload") is not registered in this process."""
    if "::" not in name or name.partition("::")[0] in _TORCH_NAMESPACES:
        return  # torch's own ops: one it does not know is the executor's to report at its call
    try:
        resolve(name)
        return
    except UnknownTargetError:
        if _registered(name):  # torch has it; the executor says at the call why it will not run it
            return
        namespace = name.partition("::")[0]
        raise UnknownTargetError(
            f"{where}: op {name} is not loaded in this process; the recorded program had loaded the library "
            f"that defines namespace '{namespace}'. Load it before replaying: --import MODULE (its Python "
            f"package) or --load-library PATH.so (opwire.replay: import it, or torch.ops.load_library(PATH), first)"
        ) from None


_TORCH_NAMESPACES = frozenset(("aten", "prims", "prim", "c10d", "_c10d_functional", "_dtensor", "fsdp", "profiler"))
"""Namespaces torch itself defines (some only once a torch module is imported, as the distributed ones)."""


def _registered(name: str) -> bool:
    namespace, _, rest = name.partition("::")
    op, _, overload = rest.partition(".")
    try:
        getattr(getattr(getattr(torch.ops, namespace), op), overload or "default")
    except (AttributeError, RuntimeError):
        return False
    return True


@dataclass(frozen=True)
class ReplayOptions:
    policy: DefaultPolicy
    mode: str
    rtol: float | None
    atol: float | None
    device: Any
    exec_policy: ExecPolicy


def run_range(
    src: TraceSource, report: ReplayReport, opts: ReplayOptions, start: int, stop: int, bar: Progress
) -> None:
    """Replay records start..stop of `src` into `report` (records are read one at a time)."""
    runner = Replayer(src, ProxyExecutor(policy=opts.policy, exec_policy=opts.exec_policy), opts)
    runner.free(-1)
    with RunGuard("replay") as guard, torch.no_grad(), time_limit(opts.exec_policy.timeout):
        for i, rec in enumerate(src.records(start, stop), start):
            check_time(f"call {i} ({rec.target})")
            if "skipped" in rec.metadata:
                report.skipped.append((i, rec.target, rec.metadata["skipped"]))
            else:
                stats = report.ops.setdefault(rec.target, OpStats())
                found = guard.call(f"call {i} ({rec.target})", runner.run, i, rec)
                stats.calls += 1
                stats.mismatches += bool(found)
                stats.worst_abs = max(stats.worst_abs, runner.errors.abs)
                stats.worst_rel = max(stats.worst_rel, runner.errors.rel)
                report.mismatches += found
                report.replayed += 1
            runner.free(i)
            bar.update()


def recorded_at(rec: m.CallRecord) -> str:
    where = rec.metadata.get("source", "")
    return f" ({where})" if where else ""


@dataclass(frozen=True)
class CallWalk:
    """What `Replayer.run` reads of a record besides values: its node, the names it reads and writes, what it
    compares and how each is labelled (the same for every replay of the record, so it can be built ahead)."""

    shape: NodeShape
    in_names: list[str]
    slots: list[tuple[str, str]]  # (node input placeholder, tensor name)
    dirty: frozenset[str]  # inputs the call writes (isolated replay hands them a copy)
    compare_values: bool
    # (j, label, recorded scalar, None) for a reproducible constant scalar output; (j, label, None, tensors) else,
    # each tensor (node output placeholder, name, object, label, whether its values are compared)
    outputs: list[tuple[int, str, Any, list[tuple[str, str, str, str, bool]] | None]]
    writes: list[tuple[str, str, str, bool]]  # (label, name before, name after, compared) per written tensor
    adopt: list[tuple[str, str]]  # (label, name) of every output tensor

    @staticmethod
    def of(i: int, rec: m.CallRecord, shape: NodeShape) -> CallWalk:
        """Record `i`'s walk (`shape`: its node); a DecodeError naming the call for malformed metadata."""
        in_names = [n for na in rec.inputs for n in tensor_names(na.arg)]
        written = written_arguments(rec, f"call {i} {rec.target}")
        by_arg = {na.name: tensor_names(na.arg) for na in rec.inputs} if written else {}
        dirty = frozenset(n for a in written for n in by_arg.get(a, []))
        outputs: list[tuple[int, str, Any, list[tuple[str, str, str, str, bool]] | None]] = []
        adopt: list[tuple[str, str]] = []
        k = 0
        for j, arg in enumerate(rec.outputs):
            label = f"output {j}"
            if j in shape.scalar_outputs:
                if reproducible(rec.target, rec.metadata, label):
                    outputs.append((j, label, arg.value, None))
                continue
            names = []
            for e, n in enumerate(tensor_names(arg)):
                where = label if arg.type == "as_tensor" else f"{label}[{e}]"
                names.append((f"#o{k}", n, object_of(n), where, reproducible(rec.target, rec.metadata, n)))
                adopt.append((label, n))
                k += 1
            outputs.append((j, label, None, names))
        writes = [
            (f"argument {a} (written in place)", before, after, reproducible(rec.target, rec.metadata, after))
            for a, new_names in written.items()
            for before, after in zip(by_arg.get(a, []), new_names, strict=False)
        ]
        slots = [(f"#i{k}", n) for k, n in enumerate(in_names)]
        return CallWalk(shape, in_names, slots, dirty, reproducible(rec.target, rec.metadata), outputs, writes, adopt)


class Replayer:
    """Runs one record at a time, keeping the live tensors of a chained replay (let go when freed)."""

    def __init__(self, src: TraceSource, ex: ProxyExecutor, opts: ReplayOptions) -> None:
        self.src, self.ex, self.mode = src, ex, opts.mode
        self.rtol, self.atol, self.device = opts.rtol, opts.atol, opts.device
        self.live: dict[str, torch.Tensor] = {}  # tensor object -> replayed tensor (chained)
        self.shapes = NodeShapes()
        self._payloads: OrderedDict[str, torch.Tensor] = OrderedDict()
        self._cached_bytes = 0
        self.errors = Errors()
        # tensor name -> its payload's byte check planned ahead (`TraceSource.byte_check`): an output that holds it
        # is equal and nothing else runs; any other takes the full check (set up by a caller, `distributed.ahead`)
        self.byte_checks: dict[str, ByteCheck] = {}

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

    def walk(self, i: int, rec: m.CallRecord) -> CallWalk:
        """What `run` reads of record `i` besides values (built ahead by a caller that replays it later)."""
        return CallWalk.of(i, rec, self.shapes.get(rec))

    def run(self, i: int, rec: m.CallRecord, walk: CallWalk | None = None) -> list[Mismatch]:
        """Replay record `i` (`walk`: `self.walk(i, rec)`, built ahead); its mismatches (self.errors: the largest
        differences seen in it)."""
        self.errors = Errors()
        if walk is None:
            walk = self.walk(i, rec)
        chained = self.mode == "chained"
        try:
            given = {n: self._tensor(n, n in walk.dirty) for n in walk.in_names}
            self.take_external(i, rec, given)
            out = self.ex.call(walk.shape.node, {k: given[n] for k, n in walk.slots})
        except OpwireError as exc:
            return self._found(i, rec, "call", Difference("error", f"{type(exc).__name__}: {exc}"))
        found: list[Mismatch] = []
        planned, held = self.byte_checks, {}  # held: name -> the output its planned check passed (this call only)
        for j, label, value, names in walk.outputs:
            if names is None:  # a constant scalar output, compared when reproducible
                diff = compare_scalar(out.get(f"#s{j}"), value, self.rtol, self.atol)
                found += self._found(i, rec, label, diff)
                continue
            for slot, n, obj, where, defined in names:
                got = out.get(slot)
                if chained and isinstance(got, torch.Tensor):
                    self.live[obj] = got
                plan = planned.get(n)
                if plan is not None and plan.holds(got, defined):
                    held[n] = got  # equal, as the full check below would find
                else:
                    found += self._full_check(i, rec, where, got, n, defined)
                if chained and walk.compare_values and not defined:
                    held.clear()  # taking a recorded value writes memory an output checked above may share
                    found += self._adopted(i, rec, where, n, got if isinstance(got, torch.Tensor) else None)
        for label, before, after, defined in walk.writes:
            live = given.get(before)
            if held.get(after, held) is not live:  # an in-place op's output is the argument it wrote: checked once
                found += self._check(i, rec, label, live, after, defined)
            if chained and not defined:
                found += self._adopted(i, rec, label, after, given.get(before))
        if chained and not walk.compare_values:
            for label, n in walk.adopt:
                found += self._adopted(i, rec, label, n, None)
        return found

    def _adopted(self, i: int, rec: m.CallRecord, label: str, name: str, live: torch.Tensor | None) -> list[Mismatch]:
        """`_adopt`, its failure reported as the call's error (the replay goes on with the replayed value)."""
        try:
            self._adopt(name, live, f"call {i} ({rec.target})")
        except OpwireError as exc:
            return self._found(i, rec, label, Difference("error", str(exc)))
        return []

    def take_external(self, i: int, rec: m.CallRecord, given: dict[str, Any] | None = None) -> None:
        """Chained replay: inputs written outside the trace (no replay can write them) take the recorded value."""
        if self.mode != "chained" or EXTERNAL not in rec.metadata:
            return  # (no names listed: `metadata_names` would give none)
        for n in metadata_names(rec.metadata, EXTERNAL, f"call {i} {rec.target}"):
            live = given.get(n) if given is not None else self._tensor(n, False)
            if isinstance(live, torch.Tensor):
                self._adopt(n, live, f"call {i} ({rec.target})")

    def check_value(self, i: int, rec: m.CallRecord, label: str, got: Any, name: str) -> list[Mismatch]:
        """Compare one replayed value with the recording under the one rule (`compare.reproducible`)."""
        return self._check(i, rec, label, got, name, reproducible(rec.target, rec.metadata, name))

    def _adopt(self, name: str, live: torch.Tensor | None, where: str) -> None:
        """Chained replay: continue from the recorded value of a nondeterministic op (random numbers, fresh
        `empty` memory), which no replay reproduces; in place into `live` so its views see it too.

        A `live` whose elements share memory (an `expand`: stride 0, which torch will not copy into) takes the
        recorded value once per memory location, its first element along each broadcast dimension. An OpwireError
        naming `where` (the call) when the value cannot be taken."""
        want = self.src.meta(name)
        if want is None or self.src.undefined(name) or _digest_only(want, self.src.nbytes(name)):
            return  # digest traces and undefined values keep no bytes: the replayed value has to do
        recorded = self._payload(name)
        try:
            if live is None:
                self.live[object_of(name)] = _copy(recorded)  # `recorded` is cached: the live value needs its own
            elif live.shape == recorded.shape and live.dtype == recorded.dtype:
                _distinct(live, live).copy_(_distinct(recorded, live))
        except RuntimeError as exc:
            raise OpwireError(
                f"{where}: chained replay could not continue from the recorded value of {name!r} "
                f"({(str(exc).splitlines() or [''])[0]}); replay the trace isolated "
                "(mode='isolated'; the CLI without --chained)"
            ) from None

    def _check(self, i: int, rec: m.CallRecord, label: str, got: Any, name: str, values: bool) -> list[Mismatch]:
        planned = self.byte_checks.get(name)
        if planned is not None and planned.holds(got, values):
            return []  # what `_full_check` finds of it, decided without the walk there
        return self._full_check(i, rec, label, got, name, values)

    def _full_check(
        self, i: int, rec: m.CallRecord, label: str, got: Any, name: str, values: bool
    ) -> list[Mismatch]:  # fmt: skip
        want = self.src.meta(name)
        if want is None:
            return self._found(i, rec, label, Difference("missing", f"the trace has no payload for {name!r}"))
        values = values and not self.src.undefined(name)  # no bytes kept: as `reproducible` says of its call
        try:
            load, same = (lambda: self._payload(name)), (lambda t: self.src.same_bytes(name, t))
            diff = compare_tensor(got, want, self.rtol, self.atol, values, load, self.errors, same)
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


def _digest_only(meta: m.TensorValue, nbytes: int) -> bool:
    """Whether a recorded tensor kept only its digest (recorded with outputs='digest')."""
    return meta.digest is not None and not nbytes and not meta.data


def _copy(t: torch.Tensor) -> torch.Tensor:
    """A copy with the same strides and storage offset (a call may write to it)."""
    storage = t.untyped_storage()
    out = torch.empty(0, dtype=t.dtype, device=t.device)
    out.set_(storage.clone(), t.storage_offset(), t.shape, t.stride())  # type: ignore[no-untyped-call]
    return out.requires_grad_(t.requires_grad)


def _distinct(t: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """`t` with every dimension that `like` broadcasts (stride 0) narrowed to its first element."""
    for d, (n, s) in enumerate(zip(like.shape, like.stride(), strict=True)):
        if s == 0 and n > 1:
            t = t.narrow(d, 0, 1)
    return t
