"""What a `--collectives` rank prepares before its replay starts: records decoded and checked against the policy,
each record's walk built (`Replayer.walk`: its node, names and labels) and its node bound, the tensor entries and
freed lists it reads decoded, and the byte check of each value it compares planned (`Replayer.byte_checks`: the
payload's layout and place in the file), so the replay loop runs the calls and compares their outputs, and little else.

Each step is one the loop would otherwise take at the record's first use, taken in the same order of records. A
step that fails here is left to the loop, which then fails at the same call with the same error: a bind error is
not kept (the loop binds again and reports it at its call), a walk that cannot be built is built again by the
loop (its error raised there), and the first tensor entry or freed list that does not decode stops the decoding
ahead (the loop decodes it, and everything after it, where it did before).

What is held is bounded: the first `AHEAD_RECORDS` records and their walks are kept (the rest are decoded twice,
by the policy check and by the loop, as before); tensor entries and freed lists are what the reader keeps once
read anyway; a byte check is a few numbers per compared value of the kept records (no payload bytes held); bound
plans are the executor's bounded table; node shapes are the replayer's cache.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

from opwire.errors import OpwireError
from opwire.proxy_executor.exec_policy import ExecPolicy
from opwire.recording.collectives import is_distributed_op
from opwire.recording.payloads import ByteCheck
from opwire.recording.replay_engine import CallWalk, Replayer, check_policy
from opwire.recording.source import TraceSource
from opwire.schema import models as m
from opwire.schema.refs import tensor_names
from opwire.serde.tensors import TORCH_DTYPES

__all__ = ["AHEAD_RECORDS", "Ahead"]

AHEAD_RECORDS = 65536
"""Records kept decoded from the set-up to the loop (a record's model takes a few kB)."""


class Ahead:
    """A rank's trace prepared for its replay loop: `records()` in order, `walk(i)` each record's bound node and
    names (`Replayer.walk`)."""

    def __init__(self, src: TraceSource, limit: int = AHEAD_RECORDS) -> None:
        self.src = src
        self.kept: list[m.CallRecord] = []
        self.walks: list[CallWalk | None] = []
        self._limit = limit

    def check(self, policy: ExecPolicy) -> None:
        """Decode every record once for the policy check (`check_policy`), keeping the first `limit` of them."""
        check_policy(_Listed(self), policy)

    def _decoded(self) -> Iterator[m.CallRecord]:
        yield from self.kept
        for i in range(len(self.kept), len(self.src)):
            rec = self.src.record(i)
            if i < self._limit:
                self.kept.append(rec)
            yield rec

    def warm(self, runner: Replayer) -> None:
        """Build and bind each kept record's node (its fast call prepared), decode the tensor entries it names and the
        freed lists, plan the byte checks of the values it compares."""
        entries = True
        try:
            self.src.freed_after(-1)
        except OpwireError:
            entries = False
        for i, rec in enumerate(self.kept):
            walk: CallWalk | None = None
            if "skipped" not in rec.metadata and not is_distributed_op(rec.target):
                try:
                    walk = runner.walk(i, rec)
                    plan = runner.ex.plan(walk.shape.node)
                    plan.prepared()  # its fast call made (`run_plan`'s)
                except Exception:  # left to the loop, which reports it at this call
                    walk = None
                else:
                    stand_ins = _stand_ins(self.src, walk)
                    if stand_ins is not None:
                        plan.estimate_ahead(stand_ins)  # the memory estimate of these shapes, kept for the call
            self.walks.append(walk)
            if entries:
                entries = self._entries(i, rec, walk, runner.byte_checks)

    def _entries(self, i: int, rec: m.CallRecord, walk: CallWalk | None, checks: dict[str, ByteCheck]) -> bool:
        """Decode the entries record `i` names and the objects freed after it, planning the byte check of each value
        the loop compares (its outputs, the arguments it writes) into `checks`; False at the first that fails."""
        try:
            for na in rec.inputs:
                for n in tensor_names(na.arg):
                    self.src.undefined(n)
            compared = [n for arg in rec.outputs for n in tensor_names(arg)]
            compared += [after for _, _, after, _ in walk.writes] if walk is not None else []
            for n in compared:
                self.src.undefined(n)
                planned = self.src.byte_check(n)
                if planned is not None:
                    checks[n] = planned
            self.src.freed_after(i)
        except OpwireError:
            return False
        return True

    def records(self) -> Iterator[m.CallRecord]:
        """Every record in order: the kept ones, then the rest decoded one at a time."""
        yield from self.kept
        yield from self.src.records(len(self.kept))

    def walk(self, i: int) -> CallWalk | None:
        """Record `i`'s walk, its node bound ahead (None: the loop builds it)."""
        return self.walks[i] if i < len(self.walks) else None


class _Listed(TraceSource):
    """The records of an `Ahead` as the policy check reads them (decoded once, the first ones kept)."""

    def __init__(self, ahead: Ahead) -> None:
        self.ahead = ahead

    def __len__(self) -> int:
        return len(self.ahead.src)

    def descriptors(self) -> list[int]:
        return self.ahead.src.descriptors()

    def records(self, start: int = 0, stop: int | None = None) -> Iterator[m.CallRecord]:
        for i, rec in enumerate(self.ahead._decoded()):
            if stop is not None and i >= stop:
                return
            if i >= start:
                yield rec


def _stand_ins(src: TraceSource, walk: CallWalk) -> dict[str, torch.Tensor] | None:
    """The call's tensor inputs as meta tensors of their recorded layouts (nothing allocated), keyed as the node
    reads them; None when one has no layout torch can take (the call reads it and reports it)."""
    out: dict[str, torch.Tensor] = {}
    for slot, name in walk.slots:
        try:
            meta = src.meta(name)
        except OpwireError:
            return None
        dtype = TORCH_DTYPES.get(meta.dtype) if meta is not None else None
        if meta is None or dtype is None:
            return None
        try:
            out[slot] = torch.empty_strided(list(meta.sizes), list(meta.strides), dtype=dtype, device="meta")
        except (RuntimeError, TypeError, ValueError, OverflowError):
            return None
    return out
