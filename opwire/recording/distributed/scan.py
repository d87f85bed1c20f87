"""One pass over a rank's trace for `opwire ranks`: its process groups and collectives as a compact summary.

A summary is plain JSON (the process groups as the IDL's JSON, each collective's place, op, tensor names,
the layouts its ranks must agree on and the few scalar arguments the numeric check reads), so processes
that read different ranks can gather them (`share.gather_json`) and reduce them alike. Only the records
of collectives are decoded (`FrameReader` reads every other record's op in place). `RankTensors` then
serves the recorded tensors of the ranks a check needs, reading several ranks at once on threads
(reading a file and SHA-256 release the GIL), each rank's file from one thread at a time, and lends the checks
the buffers they compute in (`arena`).
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from typing import Any

import torch

from opwire.recording.collectives import collective_of
from opwire.recording.distributed.collective_rules import Arena
from opwire.recording.distributed.run import Run
from opwire.recording.distributed.sequence import CollectiveCall, collective_calls, signature
from opwire.recording.frame_index import IndexedReader
from opwire.recording.frames import ScanSource
from opwire.recording.launch import rank_file
from opwire.recording.origin import flat_names
from opwire.recording.source import TraceSource
from opwire.schema import models as m
from opwire.serde import json

__all__ = ["RankTensors", "calls_of", "costs_of", "groups_of", "summarize"]

_THREADED = 1 << 20  # bytes of a collective's inputs from which its ranks are read on threads
_SCALARS = ("tag", "input_split_sizes")  # read by the checks besides each op's reduction and root


def _plain(value: Any) -> Any:
    """A scalar argument as JSON keeps it (ints, strings, lists of them); anything else by its text."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list) and all(isinstance(x, bool | int | float | str) for x in value):
        return value
    return str(value)


def summarize(src: TraceSource, rank: int, index: bool = False) -> dict[str, Any]:
    """Rank `rank`'s process groups and collectives (every group, point-to-point included) as JSON; `index`: with
    where their tensors sit in the file (`IndexedReader.index_of`, under "frames"), for processes that read them
    without scanning the file (`RankTensors.adopt`)."""
    d = src.header.distributed
    groups = [json.encode(g).decode("ascii") for g in (d.groups if d is not None else [])]
    calls = []
    tensors: list[str] = []
    for c in collective_calls(src, rank):
        names = (c.spec.reduce, c.spec.root, *_SCALARS)
        values = {k: _plain(c.scalar(k)) for k in names if k}
        sig = "" if c.spec.p2p else signature(c, src)
        flat = [*flat_names(c.inputs), *flat_names(c.outputs)]
        tensors += flat
        cost = sum(src.nbytes(n) for n in flat)
        calls.append([c.index, c.target, c.group, sig, c.inputs, c.outputs, c.source, c.module, values, cost])
    out: dict[str, Any] = {"rank": rank, "groups": groups, "calls": calls}
    if index:
        out["frames"] = IndexedReader.index_of(src.reader, tensors) if isinstance(src, ScanSource) else None
    return out


def groups_of(summaries: Sequence[dict[str, Any]]) -> list[m.TraceProcessGroup]:
    """Every process group the ranks' headers list, the first rank's entry for a name (rank order)."""
    found: dict[str, m.TraceProcessGroup] = {}
    for s in summaries:
        for g in s["groups"]:
            model = json.decode(g, m.TraceProcessGroup, source=f"rank {s['rank']} groups")
            found.setdefault(model.name, model)
    return list(found.values())


def costs_of(summaries: Sequence[dict[str, Any]]) -> dict[tuple[int, int], int]:
    """(rank, call index) -> bytes of the collective's recorded tensors, for sharing the checks out by cost."""
    return {(int(s["rank"]), int(c[0])): int(c[-1]) for s in summaries for c in s["calls"]}


def calls_of(summary: dict[str, Any]) -> list[tuple[CollectiveCall, str]]:
    """A summary's collectives as `CollectiveCall`s (arguments replaced by the scalars kept), with signatures."""
    rank = int(summary["rank"])
    out = []
    for index, target, group, sig, inputs, outputs, source, module, values, _ in summary["calls"]:
        spec = collective_of(target)
        assert spec is not None  # summarize kept collectives only
        call = CollectiveCall(rank, index, target, spec, group, {}, inputs, outputs, source, module, values)
        out.append((call, sig))
    return out


class RankTensors:
    """The recorded tensors of a run's ranks, each rank's trace opened when first needed and closed at the end."""

    def __init__(self, run: Run, threads: int = 2) -> None:
        self.run = run
        self._stack = ExitStack()
        self._srcs: dict[int, TraceSource] = {}
        self._given: dict[int, dict[str, Any]] = {}  # rank -> where its tensors sit, from the process that scanned it
        self._ready: dict[tuple[int, str], torch.Tensor] = {}
        self._checked: dict[str, int] = {}  # payload digest -> a rank whose file `key` checked it in
        self._pool = ThreadPoolExecutor(max_workers=threads) if threads > 1 else None
        self.arena = Arena()  # the checks' reductions and temporaries, reused from one check to the next

    def source(self, rank: int) -> TraceSource:
        """Rank `rank`'s trace (opened once)."""
        src = self._srcs.get(rank)
        if src is None and rank in self._given:
            path = rank_file(self.run.path, rank)
            src = self._srcs[rank] = ScanSource(path, reader=IndexedReader(path, self._given.pop(rank)))
            self._stack.callback(src.close)
        if src is None:
            src = self._srcs[rank] = self._stack.enter_context(self.run.open(rank))
        return src

    def adopt(self, summaries: Sequence[dict[str, Any]]) -> None:
        """Read the tensors of ranks not opened yet through the index their summaries carry ("frames", from the
        process that scanned the file), without scanning the files again; a rank without one is scanned when used."""
        for s in summaries:
            rank, frames = int(s["rank"]), s.get("frames")
            if frames is not None and rank not in self._srcs:
                self._given[rank] = frames

    def prefetch(self, wanted: dict[int, list[str]]) -> None:
        """Read these tensors now, one thread per rank (each rank's names in order)."""
        srcs = [self.source(r) for r in wanted]
        if self._pool is None or len(wanted) < 2:
            return
        size = sum(src.nbytes(n) for src, names in zip(srcs, wanted.values(), strict=True) for n in names)
        if size < _THREADED:
            return  # small tensors: a thread's hand-over costs more than the read

        def one(item: tuple[int, list[str]]) -> list[tuple[tuple[int, str], torch.Tensor]]:
            r, names = item
            return [((r, n), self._srcs[r].load(n, "cpu")) for n in dict.fromkeys(names)]

        for got in self._pool.map(one, wanted.items()):
            self._ready.update(got)

    def load(self, rank: int, name: str) -> torch.Tensor:
        """Tensor `name` of rank `rank` (a prefetched one is handed over once)."""
        t = self._ready.pop((rank, name), None)
        return t if t is not None else self.source(rank).load(name, "cpu")

    def key(self, rank: int, name: str) -> object | None:
        """What identifies the value of tensor `name` (layout and checked payload digest); None when unknown.

        A digest another rank's file checked already (every rank's result of an all-reduce) is checked here by
        comparing the bytes with that file's, which is several times cheaper than SHA-256 (hashed where they differ,
        so a corrupt payload is refused in the same words)."""
        src = self.source(rank)
        meta = src.meta(name)
        if meta is None:
            return None
        if isinstance(src, ScanSource):
            entry = src.reader.entry(name)
            checked = self._checked.get(entry.payload) if entry is not None and entry.payload is not None else None
            like = self._srcs.get(checked) if checked is not None and checked != rank else None
            digest = src.payload_digest(name, like if isinstance(like, ScanSource) else None)
        else:
            digest = src.payload_digest(name)
        if digest is None:
            return None
        self._checked.setdefault(digest, rank)
        return (digest, meta.dtype, tuple(meta.sizes), tuple(meta.strides), meta.storage_offset)

    def close(self) -> None:
        """Close every trace opened and stop the threads."""
        self._ready.clear()
        if self._pool is not None:
            self._pool.shutdown()
        self._stack.close()
