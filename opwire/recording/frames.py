"""A streamed trace read without a model per frame: the light reader `opwire ranks` and `opwire diff` use.

`TraceReader` decodes every tensor frame into a model when it opens a file. `FrameReader` reads the same
file with the same checks, but takes from a tensor frame only its name (the first field of the frame's
compact Thrift body, read in place) and from a record frame only its op: a tensor's metadata is decoded
when it is first asked for, a record when it is read. Every frame's CRC-32 is still checked on open, so a
corrupt frame is refused there as before; a body whose first field is not where the writer puts it is
decoded on open as `TraceReader` does. Payloads are hashed in place (`payload_digest`): the file's bytes
go through a reused buffer into SHA-256, never into a tensor. `ScanSource` is the `TraceSource` over it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Container
from pathlib import Path
from typing import TYPE_CHECKING, Any

from opwire.errors import DecodeError, OpwireError
from opwire.recording.source import StreamSource, TraceSource
from opwire.recording.stream_frames import FRAME, is_stream
from opwire.recording.stream_reader import TraceReader
from opwire.schema import models as m
from opwire.serde import budgets, tensors, thrift

if TYPE_CHECKING:
    import torch

    from opwire.recording.payloads import ByteCheck

__all__ = ["FrameReader", "ScanSource", "open_source"]

_TENSOR_HEAD = b"\x0c<\xa8"  # TraceFrame field 30 (struct TraceTensor), then its field 10 (string name)
_RECORD_HEAD = b"\x0cP\xa8"  # TraceFrame field 40 (struct CallRecord), then its field 10 (string target)
_LIGHT = 64 << 10  # tensor frames up to this size are indexed by name; larger ones are decoded on open
_HEAD_BYTES = 4096  # a record's target is read from at most this many bytes at the start of its body
_CHUNK = 1 << 20  # payload bytes hashed per read


def first_string(body: bytes, head: bytes) -> str | None:
    """The string field that follows `head` at the start of a compact Thrift body (None when it is not there)."""
    if not body.startswith(head):
        return None
    at = len(head)
    if at < len(body) and body[at] < 0x80 and at + 1 + body[at] <= len(body):  # a length below 128: one byte
        try:
            return body[at + 1 : at + 1 + body[at]].decode("utf-8")
        except UnicodeDecodeError:
            return None
    n = shift = 0
    while True:
        if at >= len(body) or shift > 28:
            return None
        byte = body[at]
        at += 1
        n |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
    if at + n > len(body):
        return None
    try:
        return body[at : at + n].decode("utf-8")
    except UnicodeDecodeError:
        return None


class FrameReader(TraceReader):
    """A `TraceReader` that indexes tensor frames by name and records by op, decoding each only when used."""

    def __init__(
        self, path: str | Path, *, max_elements: int | None = None, max_bytes: int | None = None,
        memo: dict[bytes, m.TraceFrame] | None = None,
    ) -> None:  # fmt: skip
        self._memo = memo  # shared with another reader: a record or tensor frame of the same bytes decoded once
        self._lazy: dict[str, tuple[int, int, int, int]] = {}  # name -> (body, size, check, frame position)
        self._where: dict[str, tuple[int, int, int, int]] = {}  # the same, kept once the frame is decoded
        self._charged: set[str] = set()  # tensor frames whose values the budget was charged (`twin_entry`)
        self._layouts: dict[tuple[Any, ...], bool] = {}  # a payload layout checked -> whether it loads on the CPU
        self._order: dict[str, None] = {}  # every tensor name, in the order a dict of the frames would keep
        self._targets: list[str | None] = []  # each record's op, None where the light read could not tell
        self._freed_at: dict[int, list[tuple[int, int, int, int]]] = {}  # record index -> freed frames after it
        self._chunk = bytearray(_CHUNK)
        self._buffer = memoryview(self._chunk)
        super().__init__(path, max_elements=max_elements, max_bytes=max_bytes)

    def _take(self, idx: Any, kind: bytes, body: int, size: int, check: int, pos: int) -> None:
        if kind == b"R":
            super()._take(idx, kind, body, size, check, pos)
            self._targets.append(self._record_target(body, size, check, pos))
            return
        if kind not in (b"T", b"F") or idx.header is None or size > _LIGHT:
            super()._take(idx, kind, body, size, check, pos)
            return
        member = "tensor" if kind == b"T" else "freed"
        data = self._crc_checked(self._f.read(size), check, member, pos)
        self._read_bytes += size
        if self._read_bytes > self.max_bytes:
            what = f"{self.source}: bytes of the frames decoded on open"
            raise budgets.exceeded(what, self._read_bytes, "max_bytes", self.max_bytes, f"byte {pos}")
        if kind == b"F":  # decoded when a replay asks what was freed after that record
            self._indexed(pos)
            self._freed_at.setdefault(len(idx.records) - 1, []).append((body, size, check, pos))
            return
        name = first_string(data, _TENSOR_HEAD)
        if name is None:  # not laid out as the writer lays it out: decoded now, with the usual errors
            entry = self._decode(body, size, check, "tensor", pos, self._budget).tensor
            assert entry is not None
            idx.tensors[entry.name] = self._checked(entry, pos)
            self._lazy.pop(entry.name, None)
            self._where.pop(entry.name, None)
            self._order[entry.name] = None
            return
        self._indexed(pos)
        idx.tensors.pop(name, None)
        self._lazy[name] = self._where[name] = (body, size, check, pos)
        self._order[name] = None

    def _decode(
        self, body: int, size: int, check: int, member: str, pos: int, budget: budgets.Budget | int
    ) -> m.TraceFrame:
        if self._memo is None or member not in ("record", "tensor"):
            return super()._decode(body, size, check, member, pos, budget)
        data = self._frame_bytes(body, size, check, member, pos)
        frame = self._memo.pop(data, None)  # the other reader's, decoded from these bytes (each used once)
        if frame is None:
            frame = self._memo[data] = self._parse(data, pos, budget)
        return self._member(frame, member, pos)

    def _record_target(self, body: int, size: int, check: int, pos: int) -> str | None:
        data = self._f.read(size) if size <= _HEAD_BYTES else b""
        if data:
            self._crc_checked(data, check, "record", pos)
        if not data:
            self._f.seek(body)
            data = self._f.read(_HEAD_BYTES)
        return first_string(data, _RECORD_HEAD)

    # ----------------------------------------------------------------------------------- access
    def target(self, i: int) -> str:
        """The op of record `i` (read from the frame's first field; the record is decoded only when unclear)."""
        found = self._targets[i]
        return found if found is not None else self.record(i).target

    def entry(self, name: str) -> m.TraceTensor | None:
        """The tensor frame of `name`, decoded on first use (None when the trace has none)."""
        loc = self._lazy.get(name)
        if loc is not None:
            body, size, check, pos = loc
            budget = self.max_elements if name in self._charged else self._budget  # charged once per frame
            entry = self._decode(body, size, check, "tensor", pos, budget).tensor
            assert entry is not None
            self._index.tensors[name] = self._named(entry, name, pos)
            del self._lazy[name]
        return self._index.tensors.get(name)

    def _named(self, entry: m.TraceTensor, name: str, pos: int) -> m.TraceTensor:
        """The tensor frame indexed by `name`, refused when it names another tensor or is marked undefined and
        names a payload."""
        if entry.name != name:
            raise DecodeError(f"{self.source}: the tensor frame at byte {pos} names {entry.name!r} and {name!r}")
        return self._checked(entry, pos)

    def freed_after(self, i: int) -> list[str]:
        """Objects freed after record `i` (-1: before the first); their frames decoded on first ask."""
        for body, size, check, pos in self._freed_at.pop(i, []):
            freed = self._decode(body, size, check, "freed", pos, self._budget).freed
            assert freed is not None
            self._index.freed.setdefault(i, []).extend(freed.objects)
        return super().freed_after(i)

    def names(self) -> list[str]:
        """Every tensor name of the trace."""
        return list(self._order)

    def undefined(self, name: str) -> bool:
        """Whether tensor `name`'s content is undefined (its frame decoded on first use)."""
        self.entry(name)
        return super().undefined(name)

    def undefined_count(self) -> int:
        """How many tensor entries are marked undefined (every lazy frame decoded)."""
        for name in list(self._lazy):
            self.entry(name)
        return super().undefined_count()

    def meta(self, name: str) -> m.TensorValue | None:
        """Metadata of tensor `name` (data empty), or None when the trace has no such tensor."""
        entry = self.entry(name)
        return entry.value if entry is not None else None

    def nbytes(self, name: str) -> int:
        """Payload bytes of tensor `name` (0 for empty or digest-only tensors)."""
        self.entry(name)
        return super().nbytes(name)

    def load(self, name: str, device: Any = None) -> torch.Tensor:
        """Rebuild tensor `name` from its payload (the payload's SHA-256 checked on first read)."""
        self.entry(name)
        return super().load(name, device)

    def same_bytes(self, name: str, t: Any) -> bool:
        """Whether `t` holds the stored payload of `name` byte for byte (its tensor frame decoded on first use)."""
        self.entry(name)
        return super().same_bytes(name, t)

    def byte_check(self, name: str, gone: Container[str] = ()) -> ByteCheck | None:
        """`same_bytes` of `name` planned ahead (its tensor frame decoded on first use)."""
        self.entry(name)
        return super().byte_check(name, gone)

    def verify(self) -> tuple[int, int]:
        """Check every payload's SHA-256 and every record frame's CRC-32; (payloads, records)."""
        for name in list(self._lazy):
            self.entry(name)
        return super().verify()

    def payload_digest(self, name: str, like: FrameReader | None = None) -> str | None:
        """The SHA-256 (hex) of `name`'s payload, its bytes checked against it, where `load(name)` would rebuild
        a CPU tensor from them: the same checks, the same errors (None for no payload, or another device). Bytes
        equal to those `like` checked under that digest hash to it: compared, not hashed (hashed where they differ)."""
        span = self._span(name, self.entry(name))
        if span is None:
            return None
        digest, offset, left = span
        theirs = like._index.payloads.get(digest) if like is not None and digest in like._verified else None
        if digest in self._verified or (
            theirs is not None and theirs[1] == left and self._hashes(offset, left, None, like, theirs[0])
        ):
            self._verified.add(digest)
            return digest
        h = hashlib.sha256()
        self._f.seek(offset)
        while left:
            n = self._f.readinto(self._buffer[: min(left, _CHUNK)])
            if not n:
                raise DecodeError(f"{self.source}: tensors[{name!r}]: the payload is cut short")
            h.update(self._buffer[:n])  # hashlib reads the buffer in place and releases the GIL
            left -= n
        if h.hexdigest() != digest:
            raise DecodeError(
                f"{self.source}: tensors[{name!r}]: the payload's bytes do not match its SHA-256; the file is corrupt"
            )
        self._verified.add(digest)
        return digest

    def _span(self, name: str, entry: m.TraceTensor | None) -> tuple[str, int, int] | None:
        """(digest, offset, length) of the payload of `name` (its frame: `entry`) where `load` would rebuild a CPU
        tensor from it, checked as `load` checks it (None for no payload, or another device)."""
        from opwire.recording.payloads import check_span  # deferred: torch; indexing a trace needs none

        if entry is None or entry.payload is None:
            return None
        meta, digest = entry.value, entry.payload
        where = f"{self.source}: tensors[{name!r}]"
        loc = self._index.payloads.get(digest)
        if loc is None:
            raise DecodeError(f"{where}: payload {digest[:12]}... is not in the file (cut or corrupt)")
        offset, left = loc
        device = meta.device
        key = (meta.dtype, tuple(meta.sizes), tuple(meta.strides), meta.storage_offset, meta.layout, left,
               device.type, device.index, meta.requires_grad)  # fmt: skip  # what the checks below read
        on_cpu = self._layouts.get(key)
        if on_cpu is None:  # checked once per layout (a failed check raises again each time)
            dtype, _ = check_span(meta, left, where)
            on_cpu = self._layouts[key] = tensors.target_device(meta, None, where).type == "cpu" and not (
                meta.requires_grad and not (dtype.is_floating_point or dtype.is_complex)
            )
        return (digest, offset, left) if on_cpu else None  # elsewhere, what load would do is left to load

    # --------------------------------------------------------------------- frames of two traces
    def same_record(self, i: int, other: FrameReader, j: int) -> bool:
        """Whether record `i` and `other`'s record `j` are frames of the same bytes (their CRC-32 checked)."""
        mine, theirs = self._index.records[i], other._index.records[j]
        return mine[1:] == theirs[1:] and self.record_bytes(i) == other.record_bytes(j)

    def record_bytes(self, i: int) -> bytes:
        """The body of record `i`'s frame, its CRC-32 checked."""
        body, size, check = self._index.records[i]
        return self._frame_bytes(body, size, check, "record", body - FRAME.size)

    def plain_record(self, i: int) -> Any | None:
        """Record `i` as `thrift.decode_plain` reads it (no model built), or None where `record(i)` must decide."""
        data = self.record_bytes(i)
        if len(data) >= self.max_elements:  # within the record's values budget (a value takes a byte at least)
            return None
        frame = thrift.decode_plain(data, m.TraceFrame)
        return None if frame is None else frame.record

    def twin_entry(self, name: str, other: FrameReader) -> m.TraceTensor | None:
        """The tensor frame of `name` when `other` indexes one of the same bytes (None otherwise), decoded as `entry`
        decodes it on either side (its errors; its values charged once to each reader's budget) but kept by
        neither: a diff of many calls holds what it found of each tensor, not its model."""
        mine, theirs = self._where.get(name), other._where.get(name)
        if mine is None or theirs is None or mine[1:3] != theirs[1:3]:
            return None
        data = self._frame_bytes(*mine[:3], "tensor", mine[3])
        if data != other._frame_bytes(*theirs[:3], "tensor", theirs[3]):
            return None
        entry = None if name in self._lazy else self._index.tensors.get(name)
        if entry is None or name not in other._charged:
            tally = budgets.Budget(self.max_elements)  # this frame's values, within one decode's limit
            frame: Any = thrift.decode_plain(data, m.TraceFrame, source=f"{self.source}@{mine[3]}", max_elements=tally)
            if frame is None or frame.tensor is None:  # declined, or another member: decoded (or refused) as entry
                frame = self._member(self._parse(data, mine[3], tally), "tensor", mine[3])
            if entry is None:
                self._charge(name, tally.spent, mine[3])
                entry = self._named(frame.tensor, name, mine[3])  # its values, as the model would hold them
            other._charge(name, tally.spent, theirs[3])
        return entry

    def _charge(self, name: str, values: int, pos: int) -> None:
        """Charge the budget the values of `name`'s tensor frame at byte `pos` once, as decoding it there would."""
        if name not in self._charged:
            self._charged.add(name)
            self._budget.spend(values, f"{self.source}@{pos}: values decoded so far", "")

    def same_payload(self, entry: m.TraceTensor, other: FrameReader) -> bool:
        """Whether the payload of `entry` (a `twin_entry`) passes `payload_digest`'s checks in both traces with one
        SHA-256. Where neither read it yet, this one's bytes are hashed and `other`'s compared with them (False
        also where a check fails: `payload_digest` then says why)."""
        try:
            mine = self._span(entry.name, entry)
        except OpwireError:
            return False
        if mine is None:
            return False
        digest, at, left = mine
        theirs = other._index.payloads.get(digest)  # the same entry: its checks on as many bytes pass alike
        if theirs is None or theirs[1] != left:
            return False
        if digest not in self._verified and digest not in other._verified:
            if not self._hashes(at, left, digest, other, theirs[0]):
                return False
            other._verified.add(digest)
        elif digest not in other._verified:
            if not other._hashes(theirs[0], left, digest):
                return False
            other._verified.add(digest)
        elif digest not in self._verified and not self._hashes(at, left, digest):
            return False
        self._verified.add(digest)
        return True

    def _hashes(self, at: int, left: int, digest: str | None, other: FrameReader | None = None, at2: int = 0) -> bool:
        """Whether the `left` bytes at `at` hash to `digest` (None: not hashed) and `other`'s at `at2` are the
        same bytes."""
        h = hashlib.sha256() if digest is not None else None
        self._f.seek(at)
        if other is not None:
            other._f.seek(at2)
        while left:
            n = min(left, _CHUNK)
            if self._f.readinto(self._buffer[:n]) != n:
                return False
            if h is not None:
                h.update(self._buffer[:n])
            if other is not None and (
                other._f.readinto(other._buffer[:n]) != n
                or ((self._chunk != other._chunk) if n == _CHUNK else (self._chunk[:n] != other._chunk[:n]))
            ):
                return False  # bytearrays compare with memcmp (memoryviews item by item)
            left -= n
        return h is None or h.hexdigest() == digest


class ScanSource(StreamSource):
    """A streamed trace read through a `FrameReader`."""

    reader: FrameReader

    def __init__(
        self, path: str | Path, *, max_elements: int | None = None, max_bytes: int | None = None,
        memo: dict[bytes, m.TraceFrame] | None = None, reader: FrameReader | None = None,
    ) -> None:  # fmt: skip
        if reader is None:  # (a reader of no records is falsy)
            reader = FrameReader(path, max_elements=max_elements, max_bytes=max_bytes, memo=memo)
        super().__init__(path, reader=reader)

    def target(self, i: int) -> str:
        """The op of record `i`, without decoding the record where the frame tells."""
        return self.reader.target(i)

    def payload_digest(self, name: str, like: ScanSource | None = None) -> str | None:
        """The checked SHA-256 of `name`'s payload as stored (None once replaced, or without a payload); bytes equal
        to those `like` checked under that digest are compared, not hashed."""
        twin = None if like is None else like.reader
        return None if name in self._replaced else self.reader.payload_digest(name, twin)


def open_source(path: str | Path, memo: dict[bytes, m.TraceFrame] | None = None) -> TraceSource:
    """A trace file as a `TraceSource`: a streamed one through a `FrameReader` (sharing `memo` with the readers
    given the same dict: two traces that hold many equal frames, the two runs `diff` compares, decode each once),
    any other as `load_trace` reads it."""
    from opwire.recording.recorder import load_trace  # deferred: recorder imports the recording machinery

    with open(path, "rb") as f:
        head = f.read(256)
    return ScanSource(path, memo=memo) if is_stream(head) else load_trace(path).source
