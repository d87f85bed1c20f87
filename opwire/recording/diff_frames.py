"""`diff_traces` over two streamed traces read by `FrameReader`s: frames both runs wrote alike compared as bytes.

Two recordings of the same code write the same record frame, byte for byte, for the same call on tensors of the
same names, and the same tensor frame for a tensor of one layout and one payload digest. `FrameCalls` uses that:

- Alignment. The longest prefix of record frames of equal bytes is matched first (equal bytes are equal keys,
  and `align` matches the common prefix of keys first, so the pairs are the same); the calls after it are keyed
  from their records read by `thrift.decode_plain` (no model built), and aligned as `align_calls` aligns them.
- Comparison. An aligned pair of equal record frames is proven to show no difference (`agree`) when every tensor
  it names has tensor frames of equal bytes in both traces, and every output whose values are compared has
  payloads of one SHA-256, checked: A's bytes hashed, B's compared with them. Such a pair is counted without a
  record built. Every other pair goes to `trace_diff`'s comparison of the records: a value, layout or argument
  difference, a symbolic scalar output, a tensor without a frame, without a payload or not on the
  CPU, a payload that fails its check. So the report is the one `diff_traces` gives from the records.
"""

from __future__ import annotations

from typing import Any

from opwire.recording.align import CallKey, align_calls, call_key, member
from opwire.recording.compare import reproducible
from opwire.recording.frames import FrameReader, ScanSource
from opwire.recording.source import TraceSource
from opwire.schema import models as m
from opwire.schema.refs import member_tensor_names

__all__ = ["FrameCalls"]

_SCALARS = frozenset({"as_int", "as_float", "as_bool", "as_sym_int", "as_sym_float", "as_sym_bool"})
_PLAIN = frozenset({"as_int", "as_float", "as_bool"})  # equal values compare equal, NaN included (compare_scalar)


class FrameCalls:
    """The calls of two streamed traces, aligned from their frames, and the pairs their frames prove equal."""

    def __init__(self, a: ScanSource, b: ScanSource) -> None:
        self.a, self.b = a.reader, b.reader
        self._tensors: dict[str, tuple[bool, bool] | None] = {}  # name -> (undefined, one checked payload in both
        # traces), None where the traces' frames of it differ
        n = min(len(self.a), len(self.b))
        self._prefix = 0
        while self._prefix < n and self.a.same_record(self._prefix, self.b, self._prefix):
            self._prefix += 1

    @staticmethod
    def of(a: TraceSource, b: TraceSource) -> FrameCalls | None:
        """The calls of `a` and `b` when both are streamed traces read by `FrameReader`s of their own (one file
        handle each), no tensor replaced."""
        if isinstance(a, ScanSource) and isinstance(b, ScanSource) and a.reader is not b.reader:
            alike = a.reader.max_elements == b.reader.max_elements  # a record read once stands for both
            return FrameCalls(a, b) if alike and not (a.replaced or b.replaced) else None
        return None

    def pairs(self) -> list[tuple[int, int]]:
        """The matched pairs `align_calls` gives for the two traces' call keys."""
        p = self._prefix
        keys_a = [self._key(self.a, i) for i in range(p, len(self.a))]
        keys_b = [self._key(self.b, j) for j in range(p, len(self.b))]
        return [(i, i) for i in range(p)] + [(p + i, p + j) for i, j in align_calls(keys_a, keys_b)]

    def op(self, i: int) -> str:
        """The op of call `i` of A (from its frame's first field where it tells)."""
        return self.a.target(i)

    def called(self, side: str, i: int) -> tuple[str, str]:
        """(op, source line) of call `i` of trace `side` ("A" or "B")."""
        reader = self.a if side == "A" else self.b
        rec = _record(reader, i)
        return rec.target, (rec.metadata or {}).get("source", "")

    def agree(self, i: int, j: int) -> bool:
        """Whether calls A `i` and B `j` are proven to show no difference: records of equal frames, every tensor
        named of equal frames, every output compared by value of one checked payload (the rest: not proven)."""
        if i >= self._prefix and not self.a.same_record(i, self.b, j):
            return False
        rec = self.a.plain_record(i)
        if rec is None:
            return False
        for na in rec.inputs or ():
            kind = member(na.arg)
            value = na.arg.__dict__[kind]
            names = member_tensor_names(kind, value)
            if not all(map(self._tensor, names)):
                return False
        metadata = rec.metadata or {}
        for k, x in enumerate(rec.outputs or ()):
            kind = member(x)
            reproducible(rec.target, metadata, f"output {k}")  # as the records' comparison reads it (and raises)
            if kind in _SCALARS:
                if kind not in _PLAIN:
                    return False
                continue
            for name in member_tensor_names(kind, x.__dict__[kind]):
                values = reproducible(rec.target, metadata, name)
                found = self._tensor(name)
                if found is None or (values and not (found[0] or found[1])):
                    return False  # frames differ, or values compared without one checked payload
        return True

    def records(self, i: int, j: int) -> tuple[m.CallRecord, m.CallRecord]:
        """Call `i` of A and call `j` of B, decoded."""
        return self.a.record(i), self.b.record(j)

    def _tensor(self, name: str) -> tuple[bool, bool] | None:
        """(undefined, one checked payload in both traces) of tensor `name`, or None where its frames differ."""
        if name in self._tensors:
            return self._tensors[name]
        entry = self.a.twin_entry(name, self.b)
        found = self._tensors[name] = (
            None
            if entry is None
            else (bool(entry.undefined), entry.payload is not None and self.a.same_payload(entry, self.b))
        )
        return found

    @staticmethod
    def _key(reader: FrameReader, i: int) -> CallKey:
        return call_key(_record(reader, i))


def _record(reader: FrameReader, i: int) -> Any:
    """Record `i` read plain where it can be, else decoded (with the errors a bad record raises)."""
    rec = reader.plain_record(i)
    return rec if rec is not None else reader.record(i)
