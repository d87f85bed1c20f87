"""A run directory: `rank0.trace` ... `rank{N-1}.trace` of one distributed run, checked to belong together.

Opening a run reads each rank's header (a streamed trace is indexed, never read whole); every problem is a
`DecodeError` saying which file, what was expected and what to do: a missing rank file, a rank from another
run (run id), a world size that disagrees, a trace of a single-process run, a rank trace cut short.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from opwire.errors import DecodeError
from opwire.recording.frames import open_source
from opwire.recording.launch import rank_file
from opwire.recording.source import TraceSource
from opwire.recording.stream_frames import read_stream_header
from opwire.schema import models as m

__all__ = ["Run", "is_run"]

_RANK = re.compile(r"rank(\d+)\.trace")


def is_run(path: str | Path) -> bool:
    """Whether `path` is a directory (what `opwire replay/diff/ranks` read as a run)."""
    return Path(path).is_dir()


class Run:
    """The ranks of one distributed run: world size, run id, process groups, and each rank's trace on demand."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if not self.path.is_dir():
            hint = (
                "it is a single trace: replay it with `opwire replay TRACE`, compare with `opwire diff A B`"
                if self.path.is_file()
                else "no such directory"
            )
            raise DecodeError(
                f"{self.path}: expected a run directory holding rank0.trace ... rank<N-1>.trace "
                f"(`torchrun ... -m opwire record --out RUN`); {hint}"
            )
        found = sorted(int(hit.group(1)) for p in self.path.iterdir() if (hit := _RANK.fullmatch(p.name)))
        if not found:
            raise DecodeError(
                f"{self.path}: expected rank0.trace ... rank<N-1>.trace in the run directory, found none; "
                f"record every rank with `torchrun --nproc-per-node N -m opwire record --out {self.path} -- SCRIPT.py`"
            )
        if 0 not in found:
            raise DecodeError(f"{rank_file(self.path, 0)}: missing; the run directory holds ranks {found}")
        first = self._header(0)
        self.world_size, self.run_id = first.world_size, first.run_id
        missing = [r for r in range(self.world_size) if r not in found]
        if missing:
            raise DecodeError(
                f"{rank_file(self.path, missing[0])}: missing; rank0.trace says the run has {self.world_size} ranks, "
                f"so the directory must hold rank0.trace ... rank{self.world_size - 1}.trace"
            )
        extra = [r for r in found if r >= self.world_size]
        if extra:
            raise DecodeError(
                f"{rank_file(self.path, extra[0])}: rank {extra[0]} is outside the run's world size "
                f"{self.world_size} (from rank0.trace); it belongs to another run"
            )
        for r in range(1, self.world_size):
            d = self._header(r)
            where = rank_file(self.path, r)
            if d.world_size != self.world_size:
                raise DecodeError(
                    f"{where}: world size {d.world_size}, rank0.trace says {self.world_size}; "
                    f"the traces come from runs of different sizes"
                )
            if d.run_id != self.run_id:
                raise DecodeError(
                    f"{where}: run id {d.run_id!r}, rank0.trace has {self.run_id!r}; the ranks come from "
                    f"different runs: record them again in one torchrun launch"
                )
        self._groups: list[m.TraceProcessGroup] | None = None

    def _header(self, rank: int) -> m.TraceDistributed:

        where = rank_file(self.path, rank)
        header = read_stream_header(where)  # the header frame alone: a run is validated without scanning it
        if header is not None:
            return _distributed(header, where, rank)
        with self.open(rank) as src:
            return _distributed(src.header, where, rank)

    @property
    def groups(self) -> list[m.TraceProcessGroup]:
        """Every process group a rank's calls used (read from each rank's group frames, once)."""
        if self._groups is None:
            found: dict[str, m.TraceProcessGroup] = {}
            for r in range(self.world_size):
                with self.open(r) as src:
                    d = src.header.distributed
                    for g in d.groups if d is not None else []:
                        found.setdefault(g.name, g)
            self._groups = list(found.values())
        return self._groups

    def set_groups(self, sources: list[TraceSource]) -> None:
        """Take the groups from ranks' traces already open (saves reading them again)."""
        found: dict[str, m.TraceProcessGroup] = {}
        for src in sources:
            d = src.header.distributed
            for g in d.groups if d is not None else []:
                found.setdefault(g.name, g)
        self._groups = list(found.values())

    def use_groups(self, groups: list[m.TraceProcessGroup]) -> None:
        """Take the groups gathered from the ranks' headers elsewhere (saves reading them again)."""
        self._groups = list(groups)

    @contextmanager
    def open(self, rank: int, memo: dict[bytes, m.TraceFrame] | None = None) -> Iterator[TraceSource]:
        """Rank `rank`'s trace, opened (a streamed one indexed, not read) and closed after use (`memo`: see
        `frames.open_source`)."""
        where = rank_file(self.path, rank)
        if not where.is_file():
            raise DecodeError(f"{where}: missing; the run has ranks 0..{getattr(self, 'world_size', '?')}")
        src = open_source(where, memo)
        try:
            if src.cut is not None:
                raise DecodeError(
                    f"{where}: {src.cut.removesuffix('; those replay')}; a run is checked only from complete rank "
                    "traces (the rank crashed or its disk filled): record the run again"
                )
            yield src
        finally:
            close = getattr(src, "close", None)
            if close is not None:
                close()

    def group(self, name: str) -> m.TraceProcessGroup:
        """The process group `name` (DecodeError when no rank's header lists it)."""
        for g in self.groups:
            if g.name == name:
                return g
        raise DecodeError(f"{self.path}: a call uses process group {name!r} that no rank's header lists")


def _distributed(header: m.TraceHeader, where: Path, rank: int) -> m.TraceDistributed:
    d = header.distributed
    if d is None:
        raise DecodeError(
            f"{where}: a trace of a single-process run (its header has no rank, world size or run id); "
            "a run directory holds the traces `torchrun ... -m opwire record --out RUN` writes"
        )
    if d.rank != rank:
        raise DecodeError(f"{where}: the trace says it is rank {d.rank}; the file name says rank {rank}")
    return d
