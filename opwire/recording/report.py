"""What a replay found, and the one text it prints: `str(report)` is what `opwire replay` shows.

The first divergence comes first (the earliest call whose output differs, with its source line, module and
where each input came from), then a capped list of mismatches with the count of the rest, then a
per-op table (calls, mismatches, worst absolute and relative error).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from opwire.schema import models as m
from opwire.serde.json import to_jsonable

__all__ = [
    "Mismatch",
    "OpStats",
    "ReplayReport",
    "SchemaDrift",
    "Span",
    "format_table",
    "mismatch_model",
    "span_models",
]


@dataclass(frozen=True)
class Mismatch:
    """One difference: call index, op, which output, kind, largest difference and where, and the call's origin."""

    index: int
    op: str
    output: str  # "output 0" or "argument self (written in place)"
    kind: str  # "shape" | "dtype" | "stride" | "value" | "missing" | "error"
    detail: str
    max_diff: float | None = None
    where: tuple[int, ...] | None = None
    max_rel: float | None = None
    source: str = ""  # "train.py:12 in forward"
    module: str = ""  # "MLP.blocks.3.fc1"
    inputs: tuple[str, ...] = ()  # "self = t12, output of call 16 aten::addmm.default"

    def __str__(self) -> str:
        return f"call {self.index} {self.op} {self.output}: {self.kind} mismatch: {self.detail}"

    def origin(self) -> str:
        """Where the call was made: "at train.py:12 in forward, in module MLP.fc1" (empty when unknown)."""
        parts = ([f"at {self.source}"] if self.source else []) + ([f"in module {self.module}"] if self.module else [])
        return ", ".join(parts)


@dataclass(frozen=True)
class SchemaDrift:
    """An op whose schema in the running torch differs from the one recorded (current None: not loaded)."""

    op: str
    recorded: str
    current: str | None

    def __str__(self) -> str:
        now = self.current if self.current is not None else "not registered in this process"
        return f"{self.op}: recorded {self.recorded!r}, now {now!r}"


@dataclass(frozen=True)
class Span:
    """Calls `start`..`stop - 1` of a replay and their wall seconds, every check included (`--collectives` ends a
    span after each c10d call; a rank's spans cover its timed loop in order and add up to its `seconds`)."""

    start: int
    stop: int
    seconds: float


@dataclass
class OpStats:
    """Per op: calls replayed, calls with a mismatch, largest absolute and relative difference seen."""

    calls: int = 0
    mismatches: int = 0
    worst_abs: float = 0.0
    worst_rel: float = 0.0

    def merge(self, other: OpStats) -> None:
        """Add another worker's figures."""
        self.calls += other.calls
        self.mismatches += other.mismatches
        self.worst_abs = max(self.worst_abs, other.worst_abs)
        self.worst_rel = max(self.worst_rel, other.worst_rel)


@dataclass
class ReplayReport:
    """What a replay found: mismatches (first divergence first), skipped calls, op-schema drift, per-op figures."""

    mode: str
    calls: int
    replayed: int = 0
    mismatches: list[Mismatch] = field(default_factory=list)
    skipped: list[tuple[int, str, str]] = field(default_factory=list)
    schema_drift: list[SchemaDrift] = field(default_factory=list)
    recorded_torch: str = ""
    seconds: float = 0.0
    ops: dict[str, OpStats] = field(default_factory=dict)
    cut: str | None = None  # where a cut trace ends
    tolerance: str = "dtype defaults"
    max_mismatches: int = 10  # how many mismatches str() lists
    workers: int = 1
    verbose: bool = False  # str() shows the per-op table even when every call matched
    spans: list[Span] | None = None  # `seconds` split after each c10d call (`--collectives`); None: not split

    @property
    def ok(self) -> bool:
        """True when every replayed call matched."""
        return not self.mismatches

    @property
    def complete(self) -> bool:
        """False for a trace that is cut (a crash, a partial upload) or holds no calls: nothing proves it passed."""
        return self.cut is None and self.calls > 0

    @property
    def missing(self) -> str | None:
        """What an incomplete trace lacks, in a sentence (None when complete)."""
        if self.calls == 0:
            return (
                "the trace holds no calls (it ends before its first record: the recording was interrupted, "
                "the upload cut, or the script made no recorded calls)"
            )
        return self.cut

    @property
    def first_divergence(self) -> Mismatch | None:
        """The earliest mismatch (None when everything matched)."""
        return self.mismatches[0] if self.mismatches else None

    def merge(self, part: ReplayReport) -> None:
        """Append a later range's report (workers are merged in call order)."""
        self.replayed += part.replayed
        self.mismatches += part.mismatches
        self.skipped += part.skipped
        for op, stats in part.ops.items():
            self.ops.setdefault(op, OpStats()).merge(stats)

    def to_model(self, findings: Sequence[m.Finding] = ()) -> m.ReplayOutput:
        """The report as the IDL's `ReplayOutput` record: everything `str()` shows, uncapped.

        `findings` are the report's mismatches, skips and drifts as Findings (`opwire replay --json` passes
        `opwire.validation.replay_findings(report)`); without them the list is empty."""
        first = self.first_divergence
        return m.ReplayOutput(
            mode=self.mode,
            calls=self.calls,
            replayed=self.replayed,
            ok=self.ok,
            complete=self.complete,
            mismatching_calls=len({x.index for x in self.mismatches}),
            first_divergence=None if first is None else mismatch_model(first),
            mismatches=[mismatch_model(x) for x in self.mismatches],
            skipped=[m.ReplaySkip(index=i, op=op, reason=why) for i, op, why in self.skipped],
            schema_drift=[
                m.ReplaySchemaDrift(op=d.op, recorded=d.recorded, current=d.current) for d in self.schema_drift
            ],
            recorded_torch=self.recorded_torch,
            torch_version=str(torch.__version__),
            seconds=self.seconds,
            ops={op: m.ReplayOpStats(**asdict(s)) for op, s in self.ops.items()},
            cut=self.cut,
            tolerance=self.tolerance,
            workers=self.workers,
            findings=list(findings),
            spans=span_models(self.spans),
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON codec's form of `to_model()` (its `findings` empty)."""
        data: dict[str, Any] = to_jsonable(self.to_model())
        return data

    def __str__(self) -> str:
        n_calls = len({x.index for x in self.mismatches})
        workers = f", {self.workers} workers" if self.workers > 1 else ""
        where = " in " + _count(n_calls, "call", "calls") if self.mismatches else ""
        lines = [
            f"replayed {self.replayed} of {self.calls} calls ({self.mode}{workers}) in {self.seconds:.2f}s: "
            f"{_count(len(self.mismatches), 'mismatch', 'mismatches')}{where}, {len(self.skipped)} skipped, "
            f"{_count(len(self.schema_drift), 'op schema', 'op schemas')} drifted (recorded with torch "
            f"{self.recorded_torch}, running {torch.__version__}); tolerance: {self.tolerance}"
        ]
        if self.cut:
            lines.append(f"  note: {self.cut}")
        if self.ok and self.calls and not self.verbose and self.ops:
            calls, ops = _count(self.replayed, "call", "calls"), _count(len(self.ops), "op", "ops")
            lines.append(f"all {calls} of {ops} matched (--verbose shows the per-op table)")
        lines += [f"  drift: {d}" for d in self.schema_drift]
        first = self.first_divergence
        if first is not None:
            lines.append(f"first divergence: call {first.index} {first.op} {first.output}")
            if first.origin():
                lines.append(f"  {first.origin()}")
            lines.append(f"  {first.kind} mismatch: {first.detail}")
            lines += [f"  input {x}" for x in first.inputs]
        if len(self.mismatches) > 1:
            shown = self.mismatches[: max(self.max_mismatches, 0)]
            lines.append(f"mismatches (first {len(shown)} of {len(self.mismatches)}):")
            lines += [f"  {x}" for x in shown]
            rest = len(self.mismatches) - len(shown)
            if rest > 0:
                lines.append(f"  ... and {rest} more (--max-mismatches N lists more, --json lists all)")
        lines += [f"  skipped call {i} {op}: {why}" for i, op, why in self.skipped[: max(self.max_mismatches, 0)]]
        if len(self.skipped) > self.max_mismatches:
            lines.append(f"  ... and {len(self.skipped) - self.max_mismatches} more skipped")
        if self.ops and (self.mismatches or self.verbose):
            lines.append("per op:")
            lines += ["  " + row for row in format_table(self._op_rows())]
        return "\n".join(lines)

    def _op_rows(self) -> list[list[str]]:
        order = sorted(self.ops.items(), key=lambda kv: (-kv[1].mismatches, -kv[1].calls, kv[0]))
        rows = [["op", "calls", "mismatches", "worst abs", "worst rel"]]
        for op, s in order:
            rows.append([op, str(s.calls), str(s.mismatches), _num(s.worst_abs), _num(s.worst_rel)])
        return rows


def mismatch_model(x: Mismatch) -> m.ReplayMismatch:
    """A mismatch as the IDL's `ReplayMismatch` record."""
    return m.ReplayMismatch(
        index=x.index,
        op=x.op,
        output=x.output,
        kind=x.kind,
        detail=x.detail,
        max_diff=x.max_diff,
        where=list(x.where) if x.where is not None else None,
        max_rel=x.max_rel,
        source=x.source,
        module_path=x.module,
        inputs=list(x.inputs),
    )


def span_models(spans: Sequence[Span] | None) -> list[m.ReplaySpan] | None:
    """Spans as the IDL's `ReplaySpan` records (None stays None: the replay was not split)."""
    return None if spans is None else [m.ReplaySpan(start=s.start, stop=s.stop, seconds=s.seconds) for s in spans]


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _num(x: float) -> str:
    return "0" if x == 0 else f"{x:.3g}"


def format_table(rows: list[list[str]]) -> list[str]:
    """Rows as aligned text columns: the first left-aligned, the others right-aligned."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(r)).rstrip() for r in rows
    ]
