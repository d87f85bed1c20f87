"""The reader of streamed traces: an index of the frames on open, records and payloads read on demand."""

from __future__ import annotations

import hashlib
import io
import os
import zlib
from collections.abc import Container, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from opwire.errors import DecodeError, OpwireError, printable
from opwire.recording.stream_frames import DIGEST, FRAME, KIND_MEMBER, MAX_FRAME, MEMBER_KIND, PAYLOAD, ROOT
from opwire.schema import models as m
from opwire.serde import budgets, framing, thrift
from opwire.serde.tensor_layout import MAX_STORAGE_SLACK, SLACK_BYTES

if TYPE_CHECKING:
    import torch

    from opwire.recording.payloads import ByteCheck, Scratch

__all__ = ["TraceReader"]

_RECORD = MEMBER_KIND["record"]


@dataclass
class _Index:
    header: m.TraceHeader | None = None
    op_schemas: dict[str, str] = field(default_factory=dict)
    records: list[tuple[int, int, int]] = field(default_factory=list)  # (offset, length, crc)
    tensors: dict[str, m.TraceTensor] = field(default_factory=dict)
    payloads: dict[str, tuple[int, int]] = field(default_factory=dict)  # hex digest -> (offset, length)
    freed: dict[int, list[str]] = field(default_factory=dict)  # after record i (-1: before the first)
    groups: list[m.TraceProcessGroup] = field(default_factory=list)
    end: m.TraceEnd | None = None
    cut: str | None = None


class TraceReader:
    """Reads a streamed trace: an index of its frames on open, records and payloads on demand.

    What the index keeps is bounded by one budget for the whole file: every frame decoded on open (header,
    op schemas, tensors, freed lists, end) is charged the values it holds, every record or payload frame
    indexed one value, against `max_elements`; their bytes together against `max_bytes`. A record decoded
    on demand is held only while used and is bounded by `max_elements` on its own.
    """

    def __init__(self, path: str | Path, *, max_elements: int | None = None, max_bytes: int | None = None) -> None:
        self.path = Path(path)
        self.source = str(path)
        self.max_elements = budgets.MAX_ELEMENTS if max_elements is None else max_elements
        self.max_bytes = budgets.MAX_INPUT_BYTES if max_bytes is None else max_bytes
        self._budget = budgets.Budget(self.max_elements)
        self._read_bytes = 0
        self._f: io.BufferedReader = open(self.path, "rb")
        self._size = os.fstat(self._f.fileno()).st_size
        self._verified: set[str] = set()
        self._scratch: Scratch | None = None  # the buffer its byte checks read payloads into (`byte_check`)
        try:
            self._index = self._scan()
        except BaseException:
            self._f.close()
            raise

    # --------------------------------------------------------------------------------- scanning
    def _scan(self) -> _Index:
        head = self._f.read(256)
        h = framing.read_header(head, self.source)
        if h.root != ROOT or h.codec != "compact":
            raise DecodeError(f"{self.source}: holds a {h.root} ({h.codec}), not a streamed trace")
        idx, pos = _Index(), h.offset
        end, seek, read, unpack, take = self._size, self._f.seek, self._f.read, FRAME.unpack, self._take  # per frame
        while pos < end:
            if idx.end is not None:
                raise DecodeError(f"{self.source}: {end - pos} bytes after the end frame at byte {pos}")
            if end - pos < FRAME.size:
                idx.cut = self._cut(idx, pos, "inside a frame header")
                break
            seek(pos)
            kind, size, check = unpack(read(FRAME.size))
            body = pos + FRAME.size
            if size > end - body:
                what = "a payload frame" if kind == PAYLOAD else f"a {KIND_MEMBER.get(kind, 'frame')} frame"
                idx.cut = self._cut(idx, pos, f"inside {what} ({size} bytes announced, {end - body} there)")
                break
            take(idx, kind, body, size, check, pos)
            pos = body + size
        if idx.header is None:
            raise DecodeError(f"{self.source}: the streamed trace has no header frame; the file is cut or corrupt")
        if idx.end is None and idx.cut is None:
            idx.cut = self._cut(idx, pos, "without its end frame")
        if idx.end is not None and idx.end.records != len(idx.records):
            raise DecodeError(
                f"{self.source}: the end frame counts {idx.end.records} records, the file holds {len(idx.records)}"
            )
        return idx

    def _cut(self, idx: _Index, pos: int, how: str) -> str:
        return (
            f"the trace is cut at byte {pos} of {self._size} ({how}) after {len(idx.records)} complete records; "
            f"those replay"
        )

    def _indexed(self, pos: int) -> None:
        """Charge the budget one value for the frame at byte `pos` (as `spend(1, ...)`, its words formatted only
        when it refuses)."""
        budget = self._budget
        if budget.spent < budget.max_elements:
            budget.spent += 1
        else:
            budget.spend(1, f"{self.source}: frames indexed and values decoded on open", f"byte {pos}")

    def _take(self, idx: _Index, kind: bytes, body: int, size: int, check: int, pos: int) -> None:
        if kind == PAYLOAD or kind == _RECORD:
            self._indexed(pos)
        if kind == PAYLOAD:
            if size < DIGEST:
                raise DecodeError(f"{self.source}: payload frame at byte {pos} is shorter than its digest")
            digest = self._f.read(DIGEST)
            if zlib.crc32(digest) != check:
                raise DecodeError(f"{self.source}: corrupt payload frame at byte {pos} (digest check failed)")
            idx.payloads[digest.hex()] = (body + DIGEST, size - DIGEST)
            return
        member = KIND_MEMBER.get(kind)
        if member is None:
            if kind.islower():
                return  # an optional frame of a newer minor version
            raise DecodeError(
                f"{self.source}: frame kind {kind!r} at byte {pos} is not one this opwire reads; "
                f"a newer opwire wrote the trace or the file is corrupt"
            )
        if size > MAX_FRAME:
            raise DecodeError(f"{self.source}: {member} frame at byte {pos} has {size} bytes (at most {MAX_FRAME})")
        if member == "record":
            idx.records.append((body, size, check))
            return
        self._read_bytes += size
        if self._read_bytes > self.max_bytes:
            what = f"{self.source}: bytes of the frames decoded on open"
            raise budgets.exceeded(what, self._read_bytes, "max_bytes", self.max_bytes, f"byte {pos}")
        frame = self._decode(body, size, check, member, pos, self._budget)
        if member == "header":
            if idx.header is not None:
                raise DecodeError(f"{self.source}: a second header frame at byte {pos}")
            idx.header = frame.header
        elif idx.header is None:
            raise DecodeError(f"{self.source}: the first frame (at byte {pos}) is not the header")
        elif frame.op_schema is not None:
            idx.op_schemas[frame.op_schema.op] = frame.op_schema.schema_str
        elif frame.tensor is not None:
            idx.tensors[frame.tensor.name] = self._checked(frame.tensor, pos)
        elif frame.freed is not None:
            idx.freed.setdefault(len(idx.records) - 1, []).extend(frame.freed.objects)
        elif frame.trailer is not None:
            idx.end = frame.trailer
        elif frame.group is not None:
            idx.groups.append(frame.group)

    def _checked(self, entry: m.TraceTensor, pos: int) -> m.TraceTensor:
        """A tensor frame as read, refused when it is marked undefined and also names a payload or digest."""
        if entry.undefined and (entry.payload is not None or entry.value.digest is not None):
            raise DecodeError(
                f"{self.source}: tensor {printable(entry.name[:60])!r} at byte {pos} is marked undefined and "
                f"also names a payload or digest; the file is corrupt"
            )
        return entry

    def _decode(
        self, body: int, size: int, check: int, member: str, pos: int, budget: budgets.Budget | int
    ) -> m.TraceFrame:
        data = self._frame_bytes(body, size, check, member, pos)
        return self._member(self._parse(data, pos, budget), member, pos)

    def _frame_bytes(self, body: int, size: int, check: int, member: str, pos: int) -> bytes:
        """The body of the frame at byte `pos`, its CRC-32 checked."""
        self._f.seek(body)
        return self._crc_checked(self._f.read(size), check, member, pos)

    def _crc_checked(self, data: bytes, check: int, member: str, pos: int) -> bytes:
        if zlib.crc32(data) != check:
            raise DecodeError(f"{self.source}: corrupt {member} frame at byte {pos} (CRC-32 check failed)")
        return data

    def _parse(self, data: bytes, pos: int, budget: budgets.Budget | int) -> m.TraceFrame:
        where = f"{self.source}@{pos}"
        return thrift.decode(data, m.TraceFrame, "compact", framed=False, source=where, max_elements=budget)

    def _member(self, frame: m.TraceFrame, member: str, pos: int) -> m.TraceFrame:
        """`frame`, refused when it is not the kind of frame its index entry says."""
        if getattr(frame, member) is None:
            raise DecodeError(f"{self.source}: the {member} frame at byte {pos} holds a {frame.type}")
        return frame

    # ----------------------------------------------------------------------------------- access
    @property
    def header(self) -> m.TraceHeader:
        """The header, with the op schemas of every op frame."""
        h = self._index.header
        assert h is not None
        update: dict[str, Any] = {"op_schemas": dict(sorted(self._index.op_schemas.items()))}
        if h.distributed is not None and self._index.groups:
            groups = [*h.distributed.groups, *self._index.groups]
            update["distributed"] = h.distributed.model_copy(update={"groups": groups})
        return h.model_copy(update=update)

    @property
    def cut(self) -> str | None:
        """Where and how a cut trace ends (None for a complete one)."""
        return self._index.cut

    def __len__(self) -> int:
        return len(self._index.records)

    def record(self, i: int) -> m.CallRecord:
        """Record `i`, decoded from the file."""
        body, size, check = self._index.records[i]
        rec = self._decode(body, size, check, "record", body - FRAME.size, self.max_elements).record
        assert rec is not None
        return rec

    def records(self, start: int = 0, stop: int | None = None) -> Iterator[m.CallRecord]:
        """Records start..stop, one at a time."""
        for i in range(start, len(self) if stop is None else min(stop, len(self))):
            yield self.record(i)

    def freed_after(self, i: int) -> list[str]:
        """Objects freed after record `i` (-1: before the first)."""
        return self._index.freed.get(i, [])

    def names(self) -> list[str]:
        """Every tensor name of the trace."""
        return list(self._index.tensors)

    def meta(self, name: str) -> m.TensorValue | None:
        """Metadata of tensor `name` (data empty), or None when the trace has no such tensor."""
        entry = self._index.tensors.get(name)
        return entry.value if entry is not None else None

    def undefined_count(self) -> int:
        """How many tensor entries are marked undefined (their layout kept, no payload written)."""
        return sum(1 for t in self._index.tensors.values() if t.undefined)

    def undefined(self, name: str) -> bool:
        """Whether tensor `name`'s content is undefined (the trace holds its layout, no bytes; it loads as zeros)."""
        entry = self._index.tensors.get(name)
        return entry is not None and bool(entry.undefined)

    def nbytes(self, name: str) -> int:
        """Payload bytes of tensor `name` (0 for empty or digest-only tensors)."""
        entry = self._index.tensors.get(name)
        if entry is None or entry.payload is None:
            return 0
        return self._index.payloads.get(entry.payload, (0, 0))[1]

    def load(self, name: str, device: Any = None) -> torch.Tensor:
        """Rebuild tensor `name` from its payload (the payload's SHA-256 checked on first read)."""
        from opwire.recording.payloads import rebuild_span, rebuild_undefined  # deferred: torch; records need none

        where = f"{self.source}: tensors[{name!r}]"
        entry = self._index.tensors.get(name)
        if entry is None:
            raise DecodeError(f"{where}: the trace names this tensor but holds no entry for it")
        meta = entry.value
        if entry.undefined:
            return rebuild_undefined(meta, MAX_STORAGE_SLACK * self._size + SLACK_BYTES, device, where)
        if entry.payload is None:
            if meta.digest is not None and all(n != 0 for n in meta.sizes):
                raise DecodeError(f"{where}: only a digest was kept (recorded with outputs='digest')")
            return rebuild_span(meta, 0, lambda _b: None, device, where)
        loc = self._index.payloads.get(entry.payload)
        if loc is None:
            raise DecodeError(f"{where}: payload {entry.payload[:12]}... is not in the file (cut or corrupt)")
        offset, size = loc
        digest = entry.payload

        def fill(buf: memoryview) -> None:
            self._f.seek(offset)
            if self._f.readinto(buf) != size:
                raise DecodeError(f"{where}: the payload is cut short")
            if digest not in self._verified:
                if hashlib.sha256(buf).hexdigest() != digest:
                    raise DecodeError(f"{where}: the payload's bytes do not match its SHA-256; the file is corrupt")
                self._verified.add(digest)

        return rebuild_span(meta, size, fill, device, where)

    def same_bytes(self, name: str, t: Any) -> bool:
        """Whether tensor `t` holds, byte for byte, the stored payload of `name` in its recorded layout: compared
        with the file's bytes, never rebuilt into a tensor. The payload's SHA-256 is not needed for a yes: bytes
        equal to a replayed value are the value; a corrupt payload differs from it, and `load` then refuses it."""
        from opwire.recording.payloads import span_equals  # deferred: torch; records need none

        entry = self._index.tensors.get(name)
        loc = self._index.payloads.get(entry.payload) if entry is not None and entry.payload is not None else None
        if entry is None or loc is None or entry.undefined:
            return False
        offset, size = loc
        data = os.pread(self._f.fileno(), size, offset)  # no seek: the reader seeks before each of its reads
        return len(data) == size and span_equals(t, entry.value, data)

    def byte_check(self, name: str, gone: Container[str] = ()) -> ByteCheck | None:
        """`same_bytes` of `name` planned ahead (`payloads.ByteCheck`), declining once `name` is in `gone` (replaced
        by its source); None where it could never say yes: no entry, no payload in the file, undefined content, a
        digest (`compare_tensor` compares digests then), a layout its payload's length does not fit, nothing to
        compare. The payload's place was bounded by the file's size when it was indexed; a file cut since reads
        short, and the check declines."""
        from opwire.recording.payloads import ByteCheck, Scratch, check_span  # deferred: torch; records need none

        entry = self._index.tensors.get(name)
        loc = self._index.payloads.get(entry.payload) if entry is not None and entry.payload is not None else None
        if entry is None or loc is None or entry.undefined or entry.value.digest is not None:
            return None
        offset, size = loc
        try:
            dtype, count = check_span(entry.value, size, f"{self.source}: tensors[{name!r}]")
        except OpwireError:
            return None  # `load` refuses it: the full path reports it
        if not size:
            return None
        if self._scratch is None:
            self._scratch = Scratch()  # one per reader, shared by its checks (a reader serves one thread)
        return ByteCheck(name, entry.value, dtype, count, self._f.fileno, offset, size, self._scratch, gone)

    def verify(self) -> tuple[int, int]:
        """Check every payload's SHA-256 and every record frame's CRC-32 (read once, in chunks); (payloads, records).

        A payload whose bytes do not match its digest is a DecodeError naming its byte offset and the tensors
        that use it.
        """
        for i, (body, size, check) in enumerate(self._index.records):
            self._f.seek(body)
            if zlib.crc32(self._f.read(size)) != check:
                raise DecodeError(f"{self.source}: record {i} at byte {body - FRAME.size} fails its CRC-32 check")
        for digest, (offset, size) in self._index.payloads.items():
            h = hashlib.sha256()
            self._f.seek(offset)
            left = size
            while left:
                chunk = self._f.read(min(left, 1 << 20))
                if not chunk:
                    raise DecodeError(f"{self.source}: the payload at byte {offset} is cut short")
                h.update(chunk)
                left -= len(chunk)
            if h.hexdigest() != digest:
                users = sorted(n for n, t in self._index.tensors.items() if t.payload == digest)
                shown = ", ".join(users[:5]) + (f" and {len(users) - 5} more" if len(users) > 5 else "")
                raise DecodeError(
                    f"{self.source}: the payload at byte {offset} ({size} bytes) does not match its SHA-256 "
                    f"{digest[:12]}...; tensors {shown or '(none)'} read it; the file is corrupt"
                )
            self._verified.add(digest)
        return len(self._index.payloads), len(self._index.records)

    def close(self) -> None:
        """Close the file."""
        self._f.close()

    def descriptors(self) -> list[int]:
        """The descriptor of the open trace file (none once closed)."""
        return [] if self._f.closed else [self._f.fileno()]

    def __enter__(self) -> TraceReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
