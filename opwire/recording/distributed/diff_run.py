"""`opwire diff RUN_A RUN_B`: two runs rank by rank, the earliest divergence across ranks first.

Rank r of A is diffed with rank r of B (`opwire.diff_traces`). A rank whose first difference is a collective's
result (everything before it agreed) got it from another rank, so it is listed after the ranks whose
difference starts in their own calls; values no run reproduces (random draws, undefined memory) are not
compared (`compare.reproducible`, the rule replay uses). Ranks are read by a few threads at a time,
each pair opened and closed on its own, so memory holds at most that many rank pairs, never the whole run.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from opwire.errors import DecodeError
from opwire.recording.distributed.collectives import collective_of
from opwire.recording.distributed.run import Run
from opwire.recording.recorder import Trace
from opwire.recording.trace_diff import CallDifference, OnlyIn, TraceDiff, diff_traces
from opwire.schema import models as m

__all__ = ["RunDiff", "diff_runs"]


def _inherited(event: CallDifference | OnlyIn) -> bool:
    """A collective's output differs while everything before it on this rank agreed: another rank sent it."""
    return isinstance(event, CallDifference) and event.kind != "argument" and collective_of(event.op) is not None


def _index(event: CallDifference | OnlyIn) -> int:
    if isinstance(event, CallDifference):
        return event.a_index
    return event.index if event.side == "A" else event.at


@dataclass
class RunDiff:
    """Each rank's TraceDiff, and the ranks ordered by their first divergence."""

    a: str
    b: str
    world_size: int
    ranks: list[TraceDiff] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Every rank agrees."""
        return all(d.ok for d in self.ranks)

    def divergences(self) -> list[tuple[int, CallDifference | OnlyIn]]:
        """(rank, first divergence) of every rank that diverges, earliest call first (then lowest rank)."""
        found = [(r, e) for r, d in enumerate(self.ranks) for e in d.events[:1] if e is not None]
        return sorted(found, key=lambda x: (_inherited(x[1]), _index(x[1]), x[0]))

    def __str__(self) -> str:
        lines = [f"A {self.a} vs B {self.b}: {self.world_size} ranks"]
        div = self.divergences()
        if not div:
            lines.append("every rank agrees")
        else:
            lines.append(f"{len(div)} of {self.world_size} ranks diverge; earliest first:")
            for r, e in div:
                why = " (a collective's result: it came from another rank)" if _inherited(e) else ""
                lines.append(f"  rank {r}, {e}{why}")
        for r, d in enumerate(self.ranks):
            n = len(d.differences)
            lines.append(
                f"rank {r}: {d.matched} aligned calls, {n} difference{'' if n == 1 else 's'}, "
                f"{len(d.only_a)} only in A, {len(d.only_b)} only in B"
            )
        return "\n".join(lines)

    def to_model(self) -> m.RunDiffOutput:
        """The IDL's `RunDiffOutput` record: every rank's diff and the ordered first divergences."""
        return m.RunDiffOutput(
            a=self.a,
            b=self.b,
            world_size=self.world_size,
            ok=self.ok,
            divergences=[m.RunDiffDivergence(rank=r, index=_index(e), text=str(e)) for r, e in self.divergences()],
            ranks=[d.to_model() for d in self.ranks],
        )


def diff_runs(
    a: str | Path, b: str | Path, rtol: float | None = None, atol: float | None = None, max_listed: int = 10,
    threads: int = 2,
) -> RunDiff:  # fmt: skip
    """Diff run directories `a` and `b` rank by rank (same world size required)."""
    ra, rb = Run(a), Run(b)
    if ra.world_size != rb.world_size:
        raise DecodeError(
            f"{b}: {rb.world_size} ranks, {a} has {ra.world_size}; runs are compared rank by rank and need the "
            "same world size"
        )

    def one(rank: int) -> TraceDiff:
        with ra.open(rank) as sa, rb.open(rank) as sb:
            return diff_traces(Trace(source=sa), Trace(source=sb), rtol=rtol, atol=atol, max_listed=max_listed)

    with ThreadPoolExecutor(max_workers=max(1, min(threads, ra.world_size))) as pool:
        ranks = list(pool.map(one, range(ra.world_size)))
    return RunDiff(str(a), str(b), ra.world_size, ranks)
