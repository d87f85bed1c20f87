"""`opwire.diff_traces`: two recordings of the same code, aligned call by call, and what differs.

The calls are aligned as a diff tool aligns lines (`align`): common prefix and suffix, each repetition of a
call in one run paired with the same repetition in the other (a training loop's steps stay paired step by
step), then a minimal edit script over (op, source line, module path, the kinds of its arguments), then
over (op, source line, module path), then op alone, so inserted or missing calls do not
shift everything after them and a change in step k is reported at its call in step k.

Each aligned pair is compared: arguments that are not tensors by value, tensor arguments by dtype and
shape, outputs by dtype, shape, strides and values (within tolerance, per dtype by default). Calls whose
values no run reproduces (random ops tagged `nondeterministic_seeded`, `empty*`'s uninitialised memory, a
caller's generator) are compared as replay compares them (`compare.reproducible`): dtype, shape and
strides, not values. A call only one side made is listed as such; a changed op shows as one call present
only in A and one only in B at the same place.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from opwire.recording import origin
from opwire.recording.align import align_calls, call_key, opcodes
from opwire.recording.compare import Errors
from opwire.recording.diff_frames import FrameCalls
from opwire.recording.origin import LOCAL
from opwire.recording.pair_compare import Pair, argument_differences, output_differences
from opwire.recording.recorder import Trace, load_trace
from opwire.recording.report import format_table
from opwire.schema import models as m
from opwire.serde.json import to_jsonable

__all__ = [
    "CallDifference",
    "OnlyIn",
    "OpDiff",
    "TraceDiff",
    "diff_traces",
    "divergence_model",
    "relabel",
    "set_origins",
]


@dataclass(frozen=True)
class CallDifference:
    """An aligned pair of calls that differ: in an argument or in an output."""

    a_index: int
    b_index: int
    op: str
    what: str  # "output 0", "argument alpha"
    kind: str  # "argument" | "value" | "shape" | "dtype" | "stride" | "missing"
    detail: str
    max_diff: float | None = None
    max_rel: float | None = None
    source: str = ""  # where A made the call
    origin: str = ""  # "local", "inherited", "inherited from another rank"; "" when not checked

    def __str__(self) -> str:
        at = f" (at {self.source})" if self.source else ""
        return f"call {self.a_index} (B: {self.b_index}) {self.op} {self.what}: {self.kind} differs: {self.detail}{at}"


@dataclass(frozen=True)
class OnlyIn:
    """A call one trace made and the other did not; `at` is the other trace's index where it would sit."""

    side: str  # "A" | "B"
    index: int
    at: int
    op: str
    source: str = ""

    def __str__(self) -> str:
        other = "B" if self.side == "A" else "A"
        where = f" (at {self.source})" if self.source else ""
        return f"only in {self.side}: call {self.index} {self.op}{where}, before call {self.at} of {other}"


@dataclass
class OpDiff:
    """Per op: aligned calls, calls with value differences and with argument differences, worst errors."""

    calls: int = 0
    value_diffs: int = 0
    arg_diffs: int = 0
    only_a: int = 0
    only_b: int = 0
    worst_abs: float = 0.0
    worst_rel: float = 0.0


@dataclass
class TraceDiff:
    """What differs between two traces; `first_divergence` is the earliest difference in call order."""

    a: str
    b: str
    a_calls: int
    b_calls: int
    matched: int = 0
    differences: list[CallDifference] = field(default_factory=list)
    only_a: list[OnlyIn] = field(default_factory=list)
    only_b: list[OnlyIn] = field(default_factory=list)
    ops: dict[str, OpDiff] = field(default_factory=dict)
    events: list[CallDifference | OnlyIn] = field(default_factory=list)  # everything, in alignment order
    max_listed: int = 10

    @property
    def ok(self) -> bool:
        """True when the traces made the same calls with the same arguments and outputs."""
        return not self.events

    @property
    def first_divergence(self) -> CallDifference | OnlyIn | None:
        """The earliest difference in call order."""
        return self.events[0] if self.events else None

    @property
    def first_local(self) -> CallDifference | OnlyIn | None:
        """The earliest call that differs itself (a call only one run made counts): the report's headline."""
        return next((e for e in self.events if _origin(e) == LOCAL), None)

    def to_model(self) -> m.TraceDiffOutput:
        """The diff as the IDL's `TraceDiffOutput` record, every difference listed (`opwire diff --json`)."""
        first = self.first_divergence
        return m.TraceDiffOutput(
            a=self.a,
            b=self.b,
            a_calls=self.a_calls,
            b_calls=self.b_calls,
            matched=self.matched,
            ok=self.ok,
            first_divergence=None if first is None else divergence_model(first),
            first_local=None if self.first_local is None else divergence_model(self.first_local),
            differences=[m.TraceCallDifference(**asdict(d)) for d in self.differences],
            only_a=[m.TraceOnlyIn(**asdict(o)) for o in self.only_a],
            only_b=[m.TraceOnlyIn(**asdict(o)) for o in self.only_b],
            ops={op: m.TraceDiffOpStats(**asdict(s)) for op, s in self.ops.items()},
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON codec's form of `to_model()`."""
        data: dict[str, Any] = to_jsonable(self.to_model())
        return data

    def __str__(self) -> str:
        lines = [
            f"A {self.a} ({_count(self.a_calls, 'call')}) vs B {self.b} ({_count(self.b_calls, 'call')}): "
            f"{self.matched} aligned, {_count(len(self.differences), 'difference')}, "
            f"{len(self.only_a)} only in A, {len(self.only_b)} only in B"
        ]
        first = self.first_divergence
        if first is None:
            lines.append("the traces agree")
            return "\n".join(lines)
        local = self.first_local
        if local is not None:
            lines.append(f"first local divergence: {local}")
        if local is not first:
            lines.append(f"first divergence: {_labelled(first)}")
        if len(self.events) > 1:
            shown = self.events[: max(self.max_listed, 0)]
            lines.append(f"differences (first {len(shown)} of {len(self.events)}):")
            lines += [f"  {_labelled(e)}" for e in shown]
            if len(self.events) > len(shown):
                lines.append(f"  ... and {len(self.events) - len(shown)} more (--max-mismatches N, --json lists all)")
        rows = [["op", "aligned", "value diffs", "arg diffs", "only A", "only B", "worst abs", "worst rel"]]
        for op, s in sorted(self.ops.items(), key=lambda kv: (-_weight(kv[1]), kv[0])):
            if _weight(s):
                rows.append(
                    [op, *(str(x) for x in (s.calls, s.value_diffs, s.arg_diffs, s.only_a, s.only_b)),
                     _num(s.worst_abs), _num(s.worst_rel)]
                )  # fmt: skip
        lines.append("per op (ops with differences):")
        lines += ["  " + r for r in format_table(rows)]
        return "\n".join(lines)


def divergence_model(event: CallDifference | OnlyIn) -> m.TraceDivergence:
    """A difference or a one-sided call as the IDL's `TraceDivergence` union."""
    if isinstance(event, CallDifference):
        return m.TraceDivergence(difference=m.TraceCallDifference(**asdict(event)))
    return m.TraceDivergence(only_in=m.TraceOnlyIn(**asdict(event)))


def _origin(event: CallDifference | OnlyIn) -> str:
    """LOCAL for a call only one run made, else the difference's checked origin."""
    return LOCAL if isinstance(event, OnlyIn) else event.origin


def _labelled(event: CallDifference | OnlyIn) -> str:
    origin = _origin(event)
    return f"{origin}: {event}" if origin else str(event)


def _count(n: int, noun: str) -> str:
    """ "1 call", "2 calls"."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _weight(s: OpDiff) -> int:
    return s.value_diffs + s.arg_diffs + s.only_a + s.only_b


def _num(x: float) -> str:
    return "0" if x == 0 else f"{x:.3g}"


def diff_traces(
    a: Trace | m.CallTrace | str | Path,
    b: Trace | m.CallTrace | str | Path,
    rtol: float | None = None,
    atol: float | None = None,
    max_listed: int = 10,
    *,
    origins: bool = True,
    isolate: bool = False,
    allow_ops: Iterable[str] = (),
) -> TraceDiff:
    """Align two traces call by call (tolerating inserted or missing calls) and report what differs.

    With `origins`, each call that differs is run again on the other run's inputs (`opwire.recording.origin`)
    and labelled local or inherited; that executes the traces' ops, in a sandboxed child with `isolate`.
    """
    ta, tb = _trace(a), _trace(b)
    sa, sb = ta.source, tb.source
    calls: FrameCalls | _Records = FrameCalls.of(sa, sb) or _Records(ta.records, tb.records)
    n, m_ = len(sa), len(sb)
    result = TraceDiff(_label(a, ta), _label(b, tb), n, m_, max_listed=max_listed)
    pair = Pair(sa, sb, rtol, atol)
    for tag, i1, i2, j1, j2 in opcodes(calls.pairs(), n, m_):
        if tag == "equal":
            for i, j in zip(range(i1, i2), range(j1, j2), strict=True):
                if calls.agree(i, j):
                    _agreed(result, calls.op(i))
                else:
                    _compare(result, pair, i, j, *calls.records(i, j))
            continue
        for i in range(i1, i2):
            _only(result, OnlyIn("A", i, j1, *calls.called("A", i)))
        for j in range(j1, j2):
            _only(result, OnlyIn("B", j, i1, *calls.called("B", j)))
    if origins:
        set_origins(result, ta, tb, rtol, atol, isolate, allow_ops)
    return result


def set_origins(
    result: TraceDiff, a: Trace, b: Trace, rtol: float | None = None, atol: float | None = None,
    isolate: bool = False, allow_ops: Iterable[str] = (),
) -> None:  # fmt: skip
    """Label each difference of `result` (the diff of `a` and `b`): argument differences are local; output
    differences are run again on the other run's inputs (`opwire.recording.origin`)."""
    ra, rb = a.records, b.records
    argued = {(d.a_index, d.b_index) for d in result.differences if d.kind == "argument"}
    todo = dict.fromkeys(
        (d.a_index, d.b_index) for d in result.differences if (d.a_index, d.b_index) not in argued
    )  # fmt: skip
    pairs = [(i, j, ra[i], rb[j]) for i, j in todo]
    verdicts = origin.origins(a.source, b.source, pairs, rtol, atol, allow_ops, isolate)
    found = {pair: v.origin for pair, v in verdicts.items()}
    relabel(result, {**found, **dict.fromkeys(argued, LOCAL)})


def relabel(result: TraceDiff, origins: dict[tuple[int, int], str]) -> None:
    """Set the origin of each difference whose (A index, B index) `origins` names."""
    changed: dict[int, CallDifference] = {}
    for k, d in enumerate(result.differences):
        verdict = origins.get((d.a_index, d.b_index))
        if verdict is not None and verdict != d.origin:
            changed[id(d)] = result.differences[k] = replace(d, origin=verdict)
    if changed:
        result.events = [changed.get(id(e), e) for e in result.events]


@dataclass
class _Records:
    """Two traces' calls as decoded records (what `FrameCalls` answers from frames for two streamed traces)."""

    a: list[m.CallRecord]
    b: list[m.CallRecord]

    def pairs(self) -> list[tuple[int, int]]:
        """The matched pairs of the calls' alignment."""
        return align_calls([call_key(r) for r in self.a], [call_key(r) for r in self.b])

    def agree(self, i: int, j: int) -> bool:
        """Nothing is proven alike without comparing the records."""
        del i, j
        return False

    def op(self, i: int) -> str:
        """The op of call `i` of A."""
        return self.a[i].target

    def called(self, side: str, i: int) -> tuple[str, str]:
        """(op, source line) of call `i` of trace `side` ("A" or "B")."""
        rec = (self.a if side == "A" else self.b)[i]
        return rec.target, rec.metadata.get("source", "")

    def records(self, i: int, j: int) -> tuple[m.CallRecord, m.CallRecord]:
        """Call `i` of A and call `j` of B."""
        return self.a[i], self.b[j]


def _trace(t: Trace | m.CallTrace | str | Path) -> Trace:
    if isinstance(t, str | Path):
        return load_trace(t)
    if isinstance(t, m.CallTrace):
        return Trace(t)
    if isinstance(t, Trace):
        return t
    raise TypeError(f"expected an opwire.Trace, a CallTrace model or a path, got {type(t).__name__}")


def _label(given: object, t: Trace) -> str:
    """The file a trace came from, as given (an in-memory trace that was never saved has none)."""
    if isinstance(given, str | Path):
        return str(given)
    if t.label is not None:
        return t.label
    return str(t.path) if t.path is not None else "<in-memory trace>"


def _only(result: TraceDiff, event: OnlyIn) -> None:
    (result.only_a if event.side == "A" else result.only_b).append(event)
    stats = result.ops.setdefault(event.op, OpDiff())
    if event.side == "A":
        stats.only_a += 1
    else:
        stats.only_b += 1
    result.events.append(event)


def _agreed(result: TraceDiff, op: str) -> None:
    """An aligned pair proven to show no difference, counted as `_compare` counts it."""
    result.matched += 1
    result.ops.setdefault(op, OpDiff()).calls += 1


def _compare(result: TraceDiff, pair: Pair, i: int, j: int, ra: m.CallRecord, rb: m.CallRecord) -> None:
    result.matched += 1
    stats = result.ops.setdefault(ra.target, OpDiff())
    stats.calls += 1
    source = ra.metadata.get("source", "")
    found = [
        CallDifference(i, j, ra.target, what, "argument", d, source=source)
        for what, d in argument_differences(pair, ra, rb)
    ]
    errors = Errors()
    for what, diff in output_differences(pair, ra, rb, errors):
        found.append(CallDifference(i, j, ra.target, what, diff.kind, diff.detail, diff.max_diff, diff.max_rel, source))
    stats.worst_abs, stats.worst_rel = max(stats.worst_abs, errors.abs), max(stats.worst_rel, errors.rel)
    stats.arg_diffs += any(d.kind == "argument" for d in found)
    stats.value_diffs += any(d.kind != "argument" for d in found)
    result.differences += found
    result.events += found
