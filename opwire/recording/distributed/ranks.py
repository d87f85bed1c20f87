"""`opwire ranks RUN`: do the ranks of a run agree? Collective order per group, then every collective's numbers.

Sequence: at each place of each process group's sequence, every member rank must call the same collective
with the same reduction, root, shapes and dtypes; the first place where they part is reported with the ranks
that differ from the majority (as torch's Flight Recorder does, but from the traces), and the group's later
places are not compared. Numerics: each agreeing collective's recorded outputs are recomputed from all
member ranks' recorded inputs. Point-to-point sends and receives are matched per (sender, receiver, tag).
Ranks are read in lockstep, one collective at a time: memory holds one collective's tensors per rank.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from itertools import zip_longest
from pathlib import Path

import torch

from opwire.recording.distributed.numerics import Disagreement, check_collective, check_p2p
from opwire.recording.distributed.run import Run
from opwire.recording.distributed.sequence import CollectiveCall, collective_calls, signature
from opwire.recording.source import TraceSource
from opwire.schema import models as m

__all__ = ["check_ranks", "format_ranks"]


def check_ranks(run: Run | str | Path, numerics: bool = True, max_findings: int = 100) -> m.RanksReport:
    """Check a run's ranks against each other; findings earliest first (by group place, then call)."""
    run = run if isinstance(run, Run) else Run(run)
    with ExitStack() as stack:
        srcs = [stack.enter_context(run.open(r)) for r in range(run.world_size)]
        run.set_groups(srcs)
        report = m.RanksReport(
            run_id=run.run_id, world_size=run.world_size, groups=run.groups, collectives=0, findings=[]
        )

        def load(rank: int, name: str) -> torch.Tensor:
            return srcs[rank].load(name, "cpu")

        p2p: list[CollectiveCall] = []  # sends and receives, met on the way (one read of each rank per group)
        for g in run.groups:
            _check_group(report, g, srcs, load if numerics else None, max_findings, p2p)
        _check_p2p(report, run, p2p, load if numerics else None)
    report.findings.sort(key=lambda f: (min((c for c in f.calls if c >= 0), default=-1), f.group, f.seq))
    del report.findings[max_findings:]
    return report


def _check_group(
    report: m.RanksReport,
    g: m.TraceProcessGroup,
    srcs: list[TraceSource],
    load: Callable[[int, str], torch.Tensor] | None,
    max_findings: int,
    p2p: list[CollectiveCall],
) -> None:
    members = [int(r) for r in g.ranks]
    streams = [_collectives(srcs[r], r, g.name, p2p) for r in members]
    try:
        _walk(report, g, members, srcs, streams, load, max_findings)
    finally:
        for s in streams:  # the rest of each rank's calls: its sends and receives are still matched
            for _ in s:
                pass


def _collectives(src: TraceSource, rank: int, group: str, p2p: list[CollectiveCall]) -> Iterator[CollectiveCall]:
    for c in collective_calls(src, rank, group):
        if c.spec.p2p:
            p2p.append(c)
        else:
            yield c


def _walk(
    report: m.RanksReport,
    g: m.TraceProcessGroup,
    members: list[int],
    srcs: list[TraceSource],
    streams: list[Iterator[CollectiveCall]],
    load: Callable[[int, str], torch.Tensor] | None,
    max_findings: int,
) -> None:
    for seq, calls in enumerate(zip_longest(*streams)):
        report.collectives += 1
        sigs = [signature(c, srcs[c.rank]) if c is not None else "(no call: the rank's sequence ended)" for c in calls]
        indexes = [-1] * report.world_size
        for r, c in zip(members, calls, strict=True):
            indexes[r] = c.index if c is not None else -1
        if len(set(sigs)) > 1:
            majority = _majority(sigs)
            odd = [r for r, s in zip(members, sigs, strict=True) if s != majority]
            first = calls[members.index(odd[0])]
            detail = "; ".join(f"rank {r}: {s}" for r, s in zip(members, sigs, strict=True))
            report.findings.append(_finding("sequence", g.name, seq, first, odd, indexes, detail))
            return  # later places of a desynchronized group do not line up
        if load is None or len(report.findings) >= max_findings:
            continue
        present = [c for c in calls if c is not None]
        bad = check_collective(present, load)
        if bad:
            first = calls[members.index(bad[0].rank)]
            report.findings.append(_numeric(g.name, seq, first, bad, indexes))


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


def _numeric(
    group: str, seq: int, call: CollectiveCall | None, bad: list[Disagreement], calls: list[int]
) -> m.RanksFinding:
    ranks = list(dict.fromkeys(d.rank for d in bad))
    detail = "; ".join(f"rank {d.rank} {d.what}: {d.detail}" for d in bad[:4])
    what = "not what the collective gives from all ranks' recorded inputs"
    return _finding("numeric", group, seq, call, ranks, calls, f"{what}: {detail}")


def _check_p2p(
    report: m.RanksReport, run: Run, p2p: list[CollectiveCall], load: Callable[[int, str], torch.Tensor] | None
) -> None:
    """Match the k-th send from a to b (tag t) with b's k-th receive from a (tag t), in global ranks."""
    sends: dict[tuple[str, int, int, int], list[CollectiveCall]] = {}
    recvs: dict[tuple[str, int, int, int], list[CollectiveCall]] = {}
    for c in sorted(p2p, key=lambda c: (c.rank, c.index)):
        r = c.rank
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
                report.findings.append(_finding("sequence", group, k, sc or rc, odd, indexes, detail))
                break
            if load is not None:
                bad = check_p2p(sc, rc, load)
                if bad is not None:
                    detail = f"rank {b} {bad.what} from rank {a} (tag {tag}): {bad.detail}"
                    report.findings.append(_finding("numeric", group, k, rc, [b], indexes, detail))


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
