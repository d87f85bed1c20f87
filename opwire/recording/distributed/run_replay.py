"""`opwire replay RUN`: replay every rank of a run, each in a sandboxed child; collectives checked across ranks.

A rank's own calls replay from their recorded inputs as `opwire.replay` does. A collective is not executed:
its recorded outputs are checked against what it must produce from all ranks' recorded inputs (`opwire ranks`'
numeric check, which also checks the collective order). Ranks replay one after another, each trace opened
on its own, so memory stays that of one rank's replay.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from opwire.errors import KernelError
from opwire.proxy_executor.run_budgets import MAX_MEMORY
from opwire.recording.collectives import is_distributed_op
from opwire.recording.distributed.ranks import check_ranks, format_ranks
from opwire.recording.distributed.run import Run
from opwire.recording.distributed.share import Share
from opwire.recording.recorder import Trace
from opwire.recording.replay_worker import report_from_dict, worker_report
from opwire.recording.replayer import replay
from opwire.recording.report import ReplayReport, SchemaDrift
from opwire.recording.source import TraceSource
from opwire.schema import models as m
from opwire.serde.json import to_jsonable

__all__ = ["Divergence", "RunReplay", "replay_run"]

NOT_EXECUTED = "a collective: not executed in an isolated replay; checked against all ranks' recorded inputs"


@dataclass(frozen=True)
class Divergence:
    """The first place one rank's replay (or a collective check) parts from the recording."""

    rank: int
    index: int
    op: str
    source: str
    module: str
    detail: str

    def to_model(self) -> m.RunReplayDivergence:
        """The divergence as the IDL's `RunReplayDivergence` record."""
        return m.RunReplayDivergence(
            rank=self.rank,
            index=self.index,
            op=self.op,
            source=self.source,
            module_path=self.module,
            detail=self.detail,
        )

    def __str__(self) -> str:
        where = "".join(
            x for x in (f" at {self.source}" if self.source else "", f" in {self.module}" if self.module else "")
        )
        return f"rank {self.rank}, call {self.index} {self.op}{where}: {self.detail}"


@dataclass
class RunReplay:
    """Every rank's replay report and the cross-rank collective check."""

    path: str
    mode: str  # "isolated" | "collectives"
    world_size: int
    ranks: list[ReplayReport] = field(default_factory=list)
    collectives: m.RanksReport | None = None

    def first(self) -> list[Divergence | None]:
        """Each rank's first divergence (its replay or one of its collectives), None where it has none."""
        out: list[Divergence | None] = []
        for r, rep in enumerate(self.ranks):
            cands = [
                Divergence(r, x.index, x.op, x.source, x.module, f"{x.output}: {x.kind}: {x.detail}")
                for x in rep.mismatches
            ]
            for f in self.collectives.findings if self.collectives is not None else []:
                if r in f.ranks and 0 <= f.calls[r]:
                    cands.append(Divergence(r, f.calls[r], f.op, f.source, f.module_path, f"{f.kind}: {f.detail}"))
            out.append(min(cands, key=lambda d: d.index) if cands else None)
        return out

    def overall(self) -> Divergence | None:
        """The earliest divergence over all ranks (lowest call index, then lowest rank)."""
        found = [d for d in self.first() if d is not None]
        return min(found, key=lambda d: (d.index, d.rank)) if found else None

    @property
    def ok(self) -> bool:
        """No rank diverged and the collectives agree."""
        findings = self.collectives is not None and bool(self.collectives.findings)
        return self.overall() is None and not findings and all(r.ok for r in self.ranks)

    def __str__(self) -> str:
        lines = [f"{self.path}: {self.world_size} ranks replayed ({self.mode})"]
        for r, (rep, d) in enumerate(zip(self.ranks, self.first(), strict=True)):
            lines.append(
                f"  rank {r}: {rep.replayed} of {rep.calls} calls replayed, {len(rep.skipped)} not executed "
                f"(collectives, skipped records); first divergence: {d if d is not None else 'none'}"
            )
        if self.collectives is not None:
            lines.append(format_ranks(self.collectives, self.path))
        first = self.overall()
        if first is not None:
            lines.append(f"first divergence overall: {first}")
        else:
            lines.append("no divergence on any rank" if self.ok else "no rank diverged in its calls; see the findings")
        return "\n".join(lines)

    def to_model(self, findings: Callable[[ReplayReport], Sequence[m.Finding]] | None = None) -> m.RunReplayOutput:
        """The IDL's `RunReplayOutput` record; `findings` gives each rank's Findings (`replay_findings`)."""
        first = [d for d in self.first() if d is not None]
        overall = self.overall()
        return m.RunReplayOutput(
            path=self.path,
            mode=self.mode,
            world_size=self.world_size,
            ok=self.ok,
            first_divergence=None if overall is None else overall.to_model(),
            first=[d.to_model() for d in first],
            ranks=[rep.to_model(findings(rep) if findings is not None else ()) for rep in self.ranks],
            collectives=self.collectives,
        )


class _LocalOnly(TraceSource):
    """A rank's trace with its c10d calls turned into skipped records (an isolated replay does not run them)."""

    def __init__(self, src: TraceSource) -> None:
        self.src, self.path, self.cut = src, src.path, src.cut

    @property
    def header(self) -> m.TraceHeader:
        return self.src.header

    def __len__(self) -> int:
        return len(self.src)

    def record(self, i: int) -> m.CallRecord:
        return self._local(self.src.record(i))

    def records(self, start: int = 0, stop: int | None = None) -> Iterator[m.CallRecord]:
        return (self._local(r) for r in self.src.records(start, stop))

    @staticmethod
    def _local(rec: m.CallRecord) -> m.CallRecord:
        if is_distributed_op(rec.target) and "skipped" not in rec.metadata:
            return rec.model_copy(update={"metadata": {**rec.metadata, "skipped": NOT_EXECUTED}})
        return rec

    def target(self, i: int) -> str:
        return self.src.target(i)

    def payload_digest(self, name: str) -> str | None:
        return self.src.payload_digest(name)

    def names(self) -> list[str]:
        return self.src.names()

    def meta(self, name: str) -> m.TensorValue | None:
        return self.src.meta(name)

    def load(self, name: str, device: Any = None) -> torch.Tensor:
        return self.src.load(name, device)

    def nbytes(self, name: str) -> int:
        return self.src.nbytes(name)

    def descriptors(self) -> list[int]:
        return self.src.descriptors()

    def undefined(self, name: str) -> bool:
        return self.src.undefined(name)

    def freed_after(self, i: int) -> list[str]:
        return self.src.freed_after(i)

    def replace(self, name: str, value: torch.Tensor) -> None:
        self.src.replace(name, value)


def replay_run(
    run: Run | str | Path,
    rtol: float | None = None,
    atol: float | None = None,
    *,
    allow_ops: Iterable[str] = (),
    timeout: float | None = None,
    max_mismatches: int = 10,
    isolate: bool = True,
    max_memory: int | None = None,
    share: Share | None = None,
) -> RunReplay:
    """Replay every rank of `run` isolated (collectives checked across ranks, not executed); `isolate`: each rank's
    replay runs in a sandboxed child (a crashing call is a KernelError naming the rank and the call). `share`
    splits the ranks over the processes torchrun launched (reports gathered as JSON, collectives checked split)."""

    run = run if isinstance(run, Run) else Run(run)
    result = RunReplay(str(run.path), "isolated", run.world_size)
    share = share or Share()
    reports: dict[int, ReplayReport] = {}
    for r in share.ranks(run.world_size):
        with run.open(r) as src:
            trace = Trace(source=_LocalOnly(src))
            try:
                report = replay(
                    trace, rtol=rtol, atol=atol, allow_ops=allow_ops, timeout=timeout, max_mismatches=max_mismatches,
                    isolate=isolate, max_memory=MAX_MEMORY if max_memory is None else max_memory,
                )  # fmt: skip
            except KernelError as exc:
                raise KernelError(f"rank {r}: {exc}") from None
            reports[r] = report
    if share.count > 1:
        parts = share.gather({str(r): _to_json(rep) for r, rep in reports.items()})
        reports = {int(r): _from_json(x) for part in parts for r, x in part.items()}
    result.ranks = [reports[r] for r in range(run.world_size)]
    result.collectives = check_ranks(run, share=share)
    return result


def _to_json(rep: ReplayReport) -> dict[str, Any]:
    """A rank's report as JSON (what a process hands the others)."""
    extra = [rep.recorded_torch, rep.cut, rep.tolerance, rep.max_mismatches, [asdict(x) for x in rep.schema_drift]]
    return {"report": to_jsonable(worker_report(rep)), "extra": extra}


def _from_json(x: dict[str, Any]) -> ReplayReport:
    rep = report_from_dict(x["report"])
    rep.recorded_torch, rep.cut, rep.tolerance, rep.max_mismatches, drift = x["extra"]
    rep.schema_drift = [SchemaDrift(**d) for d in drift]
    return rep
