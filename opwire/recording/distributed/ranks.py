"""`opwire ranks RUN`: do the ranks of a run agree? Collective order per group, then every collective's numbers.

Sequence: at each place of each process group's sequence, every member rank must call the same collective
with the same reduction, root, shapes and dtypes; the first place where they part is reported with the ranks
that differ from the majority (as torch's Flight Recorder does, but from the traces), and the group's later
places are not compared. Numerics: each agreeing collective's recorded outputs are recomputed from all
member ranks' recorded inputs. Point-to-point sends and receives are matched per (sender, receiver, tag).
Each rank is read once into a compact summary of its collectives; the checks then read the tensors of one
collective at a time (memory holds one collective's tensors per rank), the ranks' files read at once on threads.
Under torchrun (`share`), each process summarizes its share of the ranks and makes its share of the numeric
checks; the pieces are gathered as JSON and every process reduces them to the same report. A rank's file is
scanned by its owner alone: the summary says where its checked tensors sit (`frame_index`), and the others read
them from there.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from itertools import zip_longest
from pathlib import Path
from typing import Any

from opwire.recording.distributed.numerics import Disagreement, check_collective, check_p2p
from opwire.recording.distributed.run import Run
from opwire.recording.distributed.scan import RankTensors, calls_of, costs_of, groups_of, summarize
from opwire.recording.distributed.sequence import CollectiveCall
from opwire.recording.distributed.share import Share, young_heap
from opwire.recording.origin import any_undefined, flat_names
from opwire.schema import models as m
from opwire.serde import json

__all__ = ["check_ranks", "format_ranks"]

_ENDED = "(no call: the rank's sequence ended)"
_CALL = 64 << 10  # what a call costs a numeric check besides its tensors' bytes, in bytes read


@dataclass
class _Check:
    """A numeric check to make: a group place whose ranks agree, or a matched send and receive."""

    group: str
    seq: int
    calls: list[CollectiveCall | None]
    indexes: list[int]
    p2p: tuple[int, int, int] | None = None  # (sender, receiver, tag)


def check_ranks(
    run: Run | str | Path, numerics: bool = True, max_findings: int = 100, *, share: Share | None = None,
    threads: int = 2,
) -> m.RanksReport:  # fmt: skip
    """Check a run's ranks against each other; findings earliest first (by group place, then call).

    `share` splits the work over the processes torchrun launched (each reads its ranks, then its part of the
    numeric checks; every process returns the same report); `threads` read ranks' tensors at once."""
    run = run if isinstance(run, Run) else Run(run)
    share = share or Share()
    tensors = RankTensors(run, threads)
    try:
        with young_heap():
            return _check(run, numerics, max_findings, share, tensors)
    finally:
        tensors.close()


def _check(run: Run, numerics: bool, max_findings: int, share: Share, tensors: RankTensors) -> m.RanksReport:
    shared = share.count > 1  # each file scanned by its owner alone: the others read its tensors by its index
    mine = [summarize(tensors.source(r), r, index=shared and numerics) for r in share.ranks(run.world_size)]
    summaries = sorted((s for part in share.gather(mine) for s in part), key=lambda s: int(s["rank"]))
    tensors.adopt(summaries)
    groups = groups_of(summaries)
    run.use_groups(groups)
    report = m.RanksReport(run_id=run.run_id, world_size=run.world_size, groups=groups, collectives=0, findings=[])
    calls = [calls_of(s) for s in summaries]
    events = _walk_groups(report, groups, calls)
    events += _match_p2p(report, run, [c for c, _ in (x for per in calls for x in per) if c.spec.p2p], groups)
    checks = [e for e in events if isinstance(e, _Check)]
    found: dict[int, Any] = {}
    if numerics:
        cost = costs_of(summaries)
        taken = share.balanced([sum(cost[c.rank, c.index] + _CALL for c in x.calls if c is not None) for x in checks])
        for k, check in enumerate(checks):
            if k in taken:
                f = _numeric(check, tensors)
                found[k] = None if f is None else json.encode(f).decode("ascii")
        for part in share.gather({str(k): v for k, v in found.items()}):
            found.update((int(k), v) for k, v in part.items())
    k = 0
    for e in events:
        if not isinstance(e, _Check):
            report.findings.append(e)
            continue
        f, k = found.get(k), k + 1
        if f is not None and (e.p2p is not None or len(report.findings) < max_findings):
            report.findings.append(json.decode(f, m.RanksFinding, source="a numeric check"))
    report.findings.sort(key=lambda f: (min((c for c in f.calls if c >= 0), default=-1), f.group, f.seq))
    del report.findings[max_findings:]
    return report


def _walk_groups(
    report: m.RanksReport, groups: list[m.TraceProcessGroup], calls: list[list[tuple[CollectiveCall, str]]]
) -> list[m.RanksFinding | _Check]:
    """Each group's places in order: a numeric check per place where the ranks agree, a finding where they part
    (the group's later places are not compared)."""
    events: list[m.RanksFinding | _Check] = []
    for g in groups:
        members = [int(r) for r in g.ranks]
        streams = [
            [(c, sig) for c, sig in calls[r] if c.group == g.name and not c.spec.p2p] if r < len(calls) else []
            for r in members
        ]
        for seq, row in enumerate(zip_longest(*streams)):
            report.collectives += 1
            here = [x[0] if x is not None else None for x in row]
            sigs = [x[1] if x is not None else _ENDED for x in row]
            indexes = [-1] * report.world_size
            for r, c in zip(members, here, strict=True):
                indexes[r] = c.index if c is not None else -1
            if len(set(sigs)) > 1:
                majority = _majority(sigs)
                odd = [r for r, s in zip(members, sigs, strict=True) if s != majority]
                first = here[members.index(odd[0])]
                detail = "; ".join(f"rank {r}: {s}" for r, s in zip(members, sigs, strict=True))
                events.append(_finding("sequence", g.name, seq, first, odd, indexes, detail))
                break  # later places of a desynchronized group do not line up
            events.append(_Check(g.name, seq, here, indexes))
    return events


def _majority(sigs: list[str]) -> str:
    counts = Counter(sigs)
    best = max(counts.values())
    return next(s for s in sigs if counts[s] == best)  # ties: the lowest rank's


def _finding(
    kind: str, group: str, seq: int, call: CollectiveCall | None, ranks: list[int], calls: list[int], detail: str
) -> m.RanksFinding:
    return m.RanksFinding(
        kind=kind,
        group=group,
        seq=seq,
        op=call.target if call is not None else "",
        ranks=ranks,
        calls=calls,
        detail=detail,
        source=call.source if call is not None else "",
        module_path=call.module if call is not None else "",
    )


def _numeric(check: _Check, tensors: RankTensors) -> m.RanksFinding | None:
    """The finding of one numeric check (None when the recorded outputs follow from the inputs)."""
    if _undefined_input(check, tensors):
        return None  # a value with no defined byte (a marker in the trace) is never compared
    if check.p2p is not None:
        a, b, tag = check.p2p
        sc, rc = check.calls
        assert sc is not None and rc is not None
        tensors.prefetch({sc.rank: flat_names(sc.inputs), rc.rank: flat_names(rc.outputs)})
        bad = check_p2p(sc, rc, tensors.load)
        if bad is None:
            return None
        detail = f"rank {b} {bad.what} from rank {a} (tag {tag}): {bad.detail}"
        return _finding("numeric", check.group, check.seq, rc, [b], check.indexes, detail)
    present = [c for c in check.calls if c is not None]
    tensors.prefetch({c.rank: flat_names(c.inputs) for c in present})
    found = check_collective(present, tensors.load, tensors.key, tensors.arena)
    if not found:
        return None
    first = check.calls[[c.rank if c is not None else -1 for c in check.calls].index(found[0].rank)]
    return _disagreeing(check.group, check.seq, first, found, check.indexes)


def _undefined_input(check: _Check, tensors: RankTensors) -> bool:
    """Whether some rank's recorded input to this collective holds no defined byte (written outside the trace)."""
    return any(any_undefined(tensors.source(c.rank), c.inputs) for c in check.calls if c is not None)


def _disagreeing(
    group: str, seq: int, call: CollectiveCall | None, bad: list[Disagreement], calls: list[int]
) -> m.RanksFinding:
    ranks = list(dict.fromkeys(d.rank for d in bad))
    detail = "; ".join(f"rank {d.rank} {d.what}: {d.detail}" for d in bad[:4])
    what = "not what the collective gives from all ranks' recorded inputs"
    return _finding("numeric", group, seq, call, ranks, calls, f"{what}: {detail}")


def _match_p2p(
    report: m.RanksReport, run: Run, p2p: list[CollectiveCall], groups: list[m.TraceProcessGroup]
) -> list[m.RanksFinding | _Check]:
    """Match the k-th send from a to b (tag t) with b's k-th receive from a (tag t), in global ranks."""
    members = {g.name: [int(x) for x in g.ranks] for g in groups}
    sends: dict[tuple[str, int, int, int], list[CollectiveCall]] = {}
    recvs: dict[tuple[str, int, int, int], list[CollectiveCall]] = {}
    events: list[m.RanksFinding | _Check] = []
    for c in sorted(p2p, key=lambda c: (c.rank, c.index)):
        r = c.rank
        if r not in members.get(c.group, ()):
            continue  # a call in a group its rank's headers do not list: not read, as before
        ranks = [int(x) for x in run.group(c.group).ranks]
        peer = ranks[int(c.scalar(c.spec.root))]
        tag = int(c.scalar("tag") or 0)
        if c.spec.kind == "send":
            sends.setdefault((c.group, r, peer, tag), []).append(c)
        else:
            recvs.setdefault((c.group, peer, r, tag), []).append(c)
    for key in sorted(set(sends) | set(recvs)):
        group, a, b, tag = key
        s, v = sends.get(key, []), recvs.get(key, [])
        report.collectives += max(len(s), len(v))
        for k, (sc, rc) in enumerate(zip_longest(s, v)):
            indexes = [-1] * report.world_size
            if sc is not None:
                indexes[a] = sc.index
            if rc is not None:
                indexes[b] = rc.index
            if sc is None or rc is None:
                detail = (
                    f"rank {a} sent {len(s)} messages to rank {b} (tag {tag}), rank {b} received {len(v)} from rank {a}"
                )
                odd = [b if sc is not None else a]
                events.append(_finding("sequence", group, k, sc or rc, odd, indexes, detail))
                break
            events.append(_Check(group, k, [sc, rc], indexes, (a, b, tag)))
    return events


def format_ranks(report: m.RanksReport, path: str) -> str:
    """The report as `opwire ranks` prints it."""
    groups = ", ".join(f"{g.name} ({g.backend}, ranks {list(g.ranks)})" for g in report.groups) or "none"
    head = (
        f"{path}: {report.world_size} ranks, run {report.run_id or '(no run id)'}; process groups: {groups}; "
        f"{report.collectives} collectives checked"
    )
    if not report.findings:
        return (
            f"{head}\nconsistent: every group's ranks called the same collectives in the same order, and every "
            "collective's outputs follow from all ranks' inputs"
        )
    lines = [head, f"{len(report.findings)} finding(s), earliest first:"]
    for f in report.findings:
        rank = f.ranks[0] if f.ranks else -1
        call = f.calls[rank] if 0 <= rank < len(f.calls) else -1
        where = "".join(
            x for x in (f" at {f.source}" if f.source else "", f" in {f.module_path}" if f.module_path else "")
        )
        lines.append(
            f"  {f.kind}: group {f.group} collective #{f.seq}: rank {rank}, call {call} {f.op or '(none)'}{where}; "
            f"disagreeing ranks {list(f.ranks)}"
        )
        lines.append(f"    {f.detail}")
    return "\n".join(lines)
