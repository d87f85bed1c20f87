"""`opwire diff RUN_A RUN_B`: two runs rank by rank, the first *local* divergence across ranks first.

Rank r of A is diffed with rank r of B (`opwire.diff_traces`), and each difference is labelled local or
inherited (`opwire.recording.origin`: the call run again on the other run's inputs). A collective cannot run
alone: when its inputs agree on this rank but its result differs, the member ranks' inputs to the same
collective (same group, same place in the group's sequence) are compared, and the result is **inherited from
rank q**, the lowest member rank whose inputs differ, or **local** when none does (the collective itself
computed differently). Each rank's headline is its first local divergence; ranks whose headline is local come
first, earliest call first. Values no run reproduces (random draws, undefined memory) are not compared
(`compare.reproducible`, the rule replay uses). Ranks are diffed by a few threads at a time, each pair opened and
closed on its own; calls are run again afterwards, one rank at a time (in the sandbox from the CLI). Under
torchrun (`share`) each process diffs and labels its share of the ranks and the diffs are gathered as JSON.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from opwire.errors import DecodeError
from opwire.recording.distributed.run import Run
from opwire.recording.distributed.sequence import CollectiveCall, collective_calls
from opwire.recording.distributed.share import Share, young_heap
from opwire.recording.origin import ANOTHER_RANK, INHERITED, LOCAL, any_undefined, values_differ
from opwire.recording.recorder import Trace
from opwire.recording.source import TraceSource
from opwire.recording.trace_diff import CallDifference, OnlyIn, OpDiff, TraceDiff, diff_traces, relabel, set_origins
from opwire.schema import models as m

__all__ = ["RunDiff", "diff_runs"]


def _origin(event: CallDifference | OnlyIn) -> str:
    return LOCAL if isinstance(event, OnlyIn) else event.origin


def _index(event: CallDifference | OnlyIn) -> int:
    if isinstance(event, CallDifference):
        return event.a_index
    return event.index if event.side == "A" else event.at


@dataclass
class RunDiff:
    """Each rank's TraceDiff, and the ranks ordered by their first local divergence."""

    a: str
    b: str
    world_size: int
    ranks: list[TraceDiff] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Every rank agrees."""
        return all(d.ok for d in self.ranks)

    def divergences(self) -> list[tuple[int, CallDifference | OnlyIn]]:
        """(rank, headline) of every rank that diverges: its first local divergence, else its first one; ranks
        whose headline is local first, then by call index, then rank."""
        found: list[tuple[int, CallDifference | OnlyIn]] = []
        for r, d in enumerate(self.ranks):
            head = d.first_local or d.first_divergence
            if head is not None:
                found.append((r, head))
        return sorted(found, key=lambda x: (_origin(x[1]) != LOCAL, _index(x[1]), x[0]))

    def __str__(self) -> str:
        lines = [f"A {self.a} vs B {self.b}: {self.world_size} ranks"]
        div = self.divergences()
        if not div:
            lines.append("every rank agrees")
        else:
            lines.append(f"{len(div)} of {self.world_size} ranks diverge; first local divergence first:")
            for r, e in div:
                origin = _origin(e)
                lines.append(f"  rank {r}, {origin}: {e}" if origin else f"  rank {r}, {e}")
        for r, d in enumerate(self.ranks):
            n = len(d.differences)
            local = sum(x.origin == LOCAL for x in d.differences)
            inherited = sum(x.origin.startswith("inherited") for x in d.differences)
            labels = f" ({local} local, {inherited} inherited)" if local or inherited else ""
            lines.append(
                f"rank {r}: {d.matched} aligned calls, {n} difference{'' if n == 1 else 's'}{labels}, "
                f"{len(d.only_a)} only in A, {len(d.only_b)} only in B"
            )
        return "\n".join(lines)

    def to_model(self) -> m.RunDiffOutput:
        """The IDL's `RunDiffOutput` record: every rank's diff and the ordered headlines."""
        return m.RunDiffOutput(
            a=self.a,
            b=self.b,
            world_size=self.world_size,
            ok=self.ok,
            divergences=[
                m.RunDiffDivergence(rank=r, index=_index(e), text=str(e), origin=_origin(e))
                for r, e in self.divergences()
            ],
            ranks=[d.to_model() for d in self.ranks],
        )


def diff_runs(
    a: str | Path, b: str | Path, rtol: float | None = None, atol: float | None = None, max_listed: int = 10,
    threads: int = 2, *, origins: bool = True, isolate: bool = False, allow_ops: Iterable[str] = (),
    share: Share | None = None,
) -> RunDiff:  # fmt: skip
    """Diff run directories `a` and `b` rank by rank (same world size required), each difference labelled.

    `share` splits the ranks over the processes torchrun launched (each diffs and labels its ranks, then the
    diffs are gathered as JSON); every process returns the same `RunDiff`."""
    ra, rb = Run(a), Run(b)
    if ra.world_size != rb.world_size:
        raise DecodeError(
            f"{b}: {rb.world_size} ranks, {a} has {ra.world_size}; runs are compared rank by rank and need the "
            "same world size"
        )

    def one(rank: int) -> TraceDiff:
        memo: dict[bytes, m.TraceFrame] = {}  # a frame both runs hold alike is decoded once
        with ra.open(rank, memo) as sa, rb.open(rank, memo) as sb:
            return diff_traces(Trace(source=sa), Trace(source=sb), rtol, atol, max_listed, origins=False)

    share = share or Share()
    mine = share.ranks(ra.world_size)
    with young_heap(), ThreadPoolExecutor(max_workers=max(1, min(threads, len(mine) or 1))) as pool:
        ranks = dict(zip(mine, pool.map(one, mine), strict=True))
    if origins:
        for rank, d in ranks.items():
            if d.differences:
                with ra.open(rank) as sa, rb.open(rank) as sb:
                    set_origins(d, Trace(source=sa), Trace(source=sb), rtol, atol, isolate, allow_ops)
        _from_ranks(ra, rb, ranks, rtol, atol)
    if share.count > 1:
        parts = share.gather({str(r): _to_json(d) for r, d in ranks.items()})
        ranks = {int(r): _from_json(x) for part in parts for r, x in part.items()}
    return RunDiff(str(a), str(b), ra.world_size, [ranks[r] for r in range(ra.world_size)])


def _to_json(d: TraceDiff) -> dict[str, Any]:
    """A rank's diff as JSON (what a process hands the others): every event in order, the per-op figures."""
    events = [["difference" if isinstance(e, CallDifference) else "only", asdict(e)] for e in d.events]
    ops = {op: asdict(s) for op, s in d.ops.items()}
    return {"head": [d.a, d.b, d.a_calls, d.b_calls, d.matched, d.max_listed], "ops": ops, "events": events}


def _from_json(x: dict[str, Any]) -> TraceDiff:
    """The diff `_to_json` wrote (differences and one-sided calls are the events of their kind, in order)."""
    a, b, a_calls, b_calls, matched, max_listed = x["head"]
    d = TraceDiff(a, b, a_calls, b_calls, matched, max_listed=max_listed)
    d.ops = {op: OpDiff(**s) for op, s in x["ops"].items()}
    for kind, e in x["events"]:
        event: CallDifference | OnlyIn
        if kind == "difference":
            event = CallDifference(**e)
            d.differences.append(event)
        else:
            event = OnlyIn(**e)
            (d.only_a if event.side == "A" else d.only_b).append(event)
        d.events.append(event)
    return d


def _from_ranks(ra: Run, rb: Run, ranks: dict[int, TraceDiff], rtol: float | None, atol: float | None) -> None:
    """Name the rank each "inherited from another rank" collective result came from (or call it local)."""
    wanted = {r: [x for x in d.differences if x.origin == ANOTHER_RANK] for r, d in ranks.items()}
    if not any(wanted.values()):
        return
    with ExitStack() as stack:
        src_a = [stack.enter_context(ra.open(r)) for r in range(ra.world_size)]
        src_b = [stack.enter_context(rb.open(r)) for r in range(rb.world_size)]
        places_a = [_places(s, r) for r, s in enumerate(src_a)]
        places_b = [_places(s, r) for r, s in enumerate(src_b)]
        for r, found in wanted.items():
            at = {c.index: place for place, c in places_a[r].items()}
            labels: dict[tuple[int, int], str] = {}
            for x in found:
                place = at.get(x.a_index)
                culprit = None if place is None else _culprit(place, r, places_a, places_b, src_a, src_b, rtol, atol)
                labels[(x.a_index, x.b_index)] = (
                    LOCAL if culprit is None else INHERITED if culprit < 0 else f"inherited from rank {culprit}"
                )
            relabel(ranks[r], labels)


def _places(src: TraceSource, rank: int) -> dict[tuple[str, int], CollectiveCall]:
    """Each collective of a rank by (group, place in the group's sequence)."""
    seen: dict[str, int] = {}
    out: dict[tuple[str, int], CollectiveCall] = {}
    for c in collective_calls(src, rank):
        if c.spec.p2p:
            continue
        k = seen[c.group] = seen.get(c.group, -1) + 1
        out[(c.group, k)] = c
    return out


def _culprit(
    place: tuple[str, int], rank: int, places_a: list[dict[tuple[str, int], CollectiveCall]],
    places_b: list[dict[tuple[str, int], CollectiveCall]], src_a: list[TraceSource], src_b: list[TraceSource],
    rtol: float | None, atol: float | None,
) -> int | None:  # fmt: skip
    """The lowest other rank whose inputs to the collective at `place` differ between the runs; failing that, the
    one other rank whose inputs hold no defined byte in a run (they may differ unseen), or -1 when several do: this
    rank's own inputs agree, so the collective's result cannot be called local while another rank's are unknown."""
    unknown: list[int] = []
    for q in range(len(src_a)):
        if q == rank:
            continue
        ca, cb = places_a[q].get(place), places_b[q].get(place)
        if ca is None or cb is None:
            continue
        if values_differ(src_a[q], src_b[q], ca.inputs, cb.inputs, rtol, atol):
            return q
        if any_undefined(src_a[q], ca.inputs) or any_undefined(src_b[q], cb.inputs):
            unknown.append(q)
    return None if not unknown else unknown[0] if len(unknown) == 1 else -1
