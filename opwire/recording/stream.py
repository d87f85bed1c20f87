"""The streaming trace format: frames written as the calls happen, payloads stored once by content.

File layout (docs/wire-format.md, "Streamed traces"): opwire's header (codec compact, root type
`TraceFrame`), then frames until the end of the file. Each frame is

    kind u8 | body length u64 BE | check u32 BE | body

`P` frames hold a payload: its SHA-256 (32 bytes) and the bytes (check: CRC-32 of the digest; the digest
checks the bytes). Every other kind holds one `TraceFrame` in compact Thrift (check: CRC-32 of the body):
`H` header, `S` op schema, `T` tensor, `R` record, `F` freed objects, `E` end, `g` a process group (records
1.2; lowercase so older readers skip it). A frame that a record
names comes before the record. A file without its `E` frame was cut (a crash, a full disk): the reader
reads every whole frame before the cut and says where the trace ends. Unknown kinds in lowercase are
skipped (room for optional additions); any other unknown kind is refused.
"""

from __future__ import annotations

import hashlib
import io
import os
import queue
import struct
import threading
import weakref
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from opwire.errors import DecodeError, EncodeError
from opwire.schema import models as m
from opwire.serde import budgets, framing, thrift
from opwire.serde.outfiles import open_output

if TYPE_CHECKING:
    import torch

    from opwire.recording.payloads import Span

__all__ = ["ROOT", "TraceReader", "TraceWriter", "is_stream"]

ROOT = "TraceFrame"
_FRAME = struct.Struct(">cQI")
_MEMBER_KIND = {
    "header": b"H",
    "op_schema": b"S",
    "tensor": b"T",
    "record": b"R",
    "freed": b"F",
    "trailer": b"E",
    "group": b"g",
}
_KIND_MEMBER = {v: k for k, v in _MEMBER_KIND.items()}
_PAYLOAD = b"P"
_DIGEST = 32
BUFFER_BYTES = 128 << 20
"""Payload bytes the writer thread may hold (tensors kept alive until written) before the recorder waits."""
SNAPSHOT_BYTES = 16 << 20
"""Payloads up to this size are copied whole before hashing; larger ones a chunk of this size at a time."""
MAX_FRAME = 256 << 20
"""Largest metadata frame a reader accepts (a record or a tensor entry; payloads are bounded by the file)."""


def is_stream(head: bytes) -> bool:
    """Whether bytes starting a file are a streamed trace (opwire's header naming root TraceFrame)."""
    sniffed = framing.sniff(head)
    return sniffed is not None and sniffed[1] == ROOT


def read_stream_header(path: str | Path) -> m.TraceHeader | None:
    """The header frame of a streamed trace, read alone (None when `path` is not a streamed trace).

    Op schemas and process groups come in later frames: open a `TraceReader` for those.
    """
    with open(path, "rb") as f:
        head = f.read(256)
        if not is_stream(head):
            return None
        h = framing.read_header(head, str(path))
        f.seek(h.offset)
        raw = f.read(_FRAME.size)
        if len(raw) < _FRAME.size:
            raise DecodeError(f"{path}: the streamed trace has no header frame; the file is cut or corrupt")
        kind, size, check = _FRAME.unpack(raw)
        body = f.read(min(size, MAX_FRAME)) if kind == b"H" else b""
    if kind != b"H" or len(body) != size or zlib.crc32(body) != check:
        raise DecodeError(f"{path}: the first frame is not a whole header frame; the file is cut or corrupt")
    frame = thrift.decode(body, m.TraceFrame, "compact", framed=False, source=f"{path}@{h.offset}")
    if frame.header is None:
        raise DecodeError(f"{path}: the first frame holds a {frame.type}, not the header")
    return frame.header


class TraceWriter:
    """Writes a streamed trace: header first, then tensors, records and freed objects as they come.

    Hashing and writing payloads happen on a writer thread, in submission order, while the program runs
    on. A pending payload keeps its storage alive (never the program's tensor object: torch's autograd
    steals a gradient only when no one else holds its tensor), at most `buffer_bytes` of them at a time;
    then the caller waits. `before_write(t)` waits until no pending payload reads `t`'s storage: the
    recorder calls it before a call writes there, so a value is copied out before it is overwritten.
    """

    def __init__(self, path: str | Path, header: m.TraceHeader, buffer_bytes: int = BUFFER_BYTES) -> None:
        self.path = Path(path)
        self._f: IO[bytes] | None = open_output(self.path, buffering=1 << 20)
        self._f.write(framing.write_header("compact", ROOT))
        self.records = self.tensors = self.payloads = self.payload_bytes = 0
        self._written: set[bytes] = set()
        # storage span identity -> (the tensor that showed it, its payload): a view of an already copied span
        # (a weight and its transpose) is not copied or hashed again while that tensor keeps the storage alive
        self._known: dict[tuple[Any, ...], tuple[weakref.ref[torch.Tensor], _Payload]] = {}
        self._limit = buffer_bytes
        self._cond = threading.Condition()
        self._queued_bytes = self._in_flight = 0
        self._pending: dict[int, int] = {}  # storage -> pending jobs reading it
        self._error: BaseException | None = None
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._loop, name="opwire-trace-writer", daemon=True)
        self._thread.start()
        self._frame("header", header)

    # ---------------------------------------------------------------------------- writer thread
    def _loop(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            try:
                if self._error is None:
                    job.run()
            except BaseException as exc:  # kept and raised in the recording thread
                self._error = exc
            finally:
                with self._cond:
                    self._queued_bytes -= job.nbytes
                    self._in_flight -= 1
                    if job.storage is not None:
                        left = self._pending[job.storage] - 1
                        if left:
                            self._pending[job.storage] = left
                        else:
                            del self._pending[job.storage]
                    self._cond.notify_all()
                del job

    def _submit(self, run: Callable[[], None], nbytes: int = 0, storage: int | None = None) -> None:
        self._raise()
        with self._cond:
            while self._queued_bytes and self._queued_bytes + nbytes > self._limit and self._error is None:
                self._cond.wait()
            self._queued_bytes += nbytes
            self._in_flight += 1
            if storage is not None:
                self._pending[storage] = self._pending.get(storage, 0) + 1
        self._jobs.put(_Job(run, nbytes, storage))

    def before_write(self, t: torch.Tensor | None) -> None:
        """Wait until no pending payload reads `t`'s storage (None: until every job is done)."""
        storage = None if t is None else _storage_ptr(t)
        with self._cond:
            while (self._in_flight if storage is None else storage in self._pending) and self._error is None:
                self._cond.wait()
        self._raise()

    def _raise(self) -> None:
        if self._error is not None:
            exc, self._error = self._error, None
            if isinstance(exc, OSError | EncodeError):
                raise exc
            raise EncodeError(f"{self.path}: writing the trace failed: {type(exc).__name__}: {exc}") from exc

    # ------------------------------------------------------------------------------------- frames
    def _frame(self, member: str, value: Any) -> None:
        body = thrift.encode(m.TraceFrame(**{member: value}), "compact", framed=False)
        self._submit(lambda: self._write(_MEMBER_KIND[member], body, zlib.crc32(body)))

    def _write(self, kind: bytes, body: bytes | memoryview, check: int, extra: memoryview | None = None) -> None:
        if self._f is None:
            raise EncodeError(f"{self.path}: the trace is already closed")
        size = len(body) + (len(extra) if extra is not None else 0)
        self._f.write(_FRAME.pack(kind, size, check))
        self._f.write(body)
        if extra is not None:
            self._f.write(extra)

    def op_schema(self, op: str, schema: str) -> None:
        """Write the schema string of an op (before its first record)."""
        self._frame("op_schema", m.TraceOpSchema(op=op, schema_str=schema))

    def record(self, rec: m.CallRecord) -> None:
        """Write one call record."""
        self._frame("record", rec)
        self.records += 1

    def freed(self, objects: list[str]) -> None:
        """Write tensor objects that no later record names."""
        if objects:
            self._frame("freed", m.TraceFreed(objects=objects))

    def group(self, group: m.TraceProcessGroup) -> None:
        """Write a process group (before the first record that uses it)."""
        self._frame("group", group)

    def tensor(self, name: str, t: torch.Tensor, full: bool, version: Any = None) -> None:
        """Write the tensor entry `name` for `t` (and its payload unless it is stored already or `full` is False).

        `version` identifies the storage's contents (e.g. how often it was written): equal spans with the same
        version share the payload without hashing again. The layout is checked now (EncodeError here); the
        bytes are hashed and written by the writer thread.
        """
        from opwire.recording.payloads import digest_of, span_of  # deferred: torch; reading a trace needs none

        span = span_of(t, name)
        meta = span.meta
        if not full:
            meta = meta.model_copy(update={"digest": digest_of(span.owner)})
        payload = self._payload(span, t, version) if full and span.nbytes else None

        def run() -> None:
            digest = payload.resolve(self) if payload is not None else None
            frame = m.TraceFrame(tensor=m.TraceTensor(name=name, value=meta, payload=digest))
            body = thrift.encode(frame, "compact", framed=False)
            self._write(_MEMBER_KIND["tensor"], body, zlib.crc32(body))
            self.tensors += 1

        fresh = payload is not None and payload.fresh
        self._submit(run, payload.nbytes if payload is not None and fresh else 0, _storage_ptr(t) if fresh else None)
        if payload is not None:
            payload.fresh = False

    def _payload(self, span: Span, t: torch.Tensor, version: Any) -> _Payload:
        key = (*span.key, version, _version_of(t))
        known = self._known.get(key)
        if known is not None and known[0]() is not None:
            return known[1]
        payload = _Payload(span)
        known_spans = self._known

        def forget(_ref: weakref.ref[torch.Tensor]) -> None:
            known_spans.pop(key, None)

        try:
            known_spans[key] = (weakref.ref(t, forget), payload)
        except TypeError:  # a tensor type without weak references: no reuse by identity
            pass
        return payload

    def tensor_value(self, name: str, tv: m.TensorValue) -> None:
        """Write a tensor entry from a TensorValue (converting an in-memory trace)."""
        from opwire.serde import tensors

        if not tv.data and tv.digest is not None:
            self._frame("tensor", m.TraceTensor(name=name, value=tv))
            self.tensors += 1
            return
        self.tensor(name, tensors.to_tensor(tv, "cpu", f"tensors[{name!r}]"), True)

    def _store(self, buffer: memoryview) -> str:
        """Writer thread: snapshot a payload, hash and write that snapshot unless the file holds those bytes already.

        The bytes hashed are the bytes written: memory the program writes meanwhile (another thread, a C++ hook
        such as DDP's reducer) cannot make the file disagree with its own digest. A payload above
        `SNAPSHOT_BYTES` is copied a chunk at a time, each chunk hashed and written, its digest filled in after.
        """
        if len(buffer) <= SNAPSHOT_BYTES:
            data = bytes(buffer)
            digest = hashlib.sha256(data).digest()
            if digest not in self._written:
                self._written.add(digest)
                self._write(_PAYLOAD, digest, zlib.crc32(digest), memoryview(data))
                self._count_payload(len(data))
            return digest.hex()
        return self._store_chunked(buffer)

    def _store_chunked(self, buffer: memoryview) -> str:
        assert self._f is not None
        start = self._f.tell()
        self._f.write(_FRAME.pack(_PAYLOAD, _DIGEST + len(buffer), 0) + bytes(_DIGEST))
        h = hashlib.sha256()
        for at in range(0, len(buffer), SNAPSHOT_BYTES):
            chunk = bytes(buffer[at : at + SNAPSHOT_BYTES])
            h.update(chunk)
            self._f.write(chunk)
        digest = h.digest()
        if digest in self._written:  # the same bytes are stored already: drop this copy
            self._f.seek(start)
            self._f.truncate()
            return digest.hex()
        self._written.add(digest)
        end = self._f.tell()
        self._f.seek(start)
        self._f.write(_FRAME.pack(_PAYLOAD, _DIGEST + len(buffer), zlib.crc32(digest)) + digest)
        self._f.seek(end)
        self._count_payload(len(buffer))
        return digest.hex()

    def _count_payload(self, nbytes: int) -> None:
        self.payloads += 1
        self.payload_bytes += nbytes

    def close(self) -> None:
        """Wait for the writer thread, write the end frame and close the file."""
        if self._f is None:
            return
        self._jobs.put(None)
        self._thread.join()
        try:
            self._raise()
            end = m.TraceEnd(
                records=self.records, tensors=self.tensors, payloads=self.payloads, payload_bytes=self.payload_bytes
            )
            body = thrift.encode(m.TraceFrame(trailer=end), "compact", framed=False)
            self._write(_MEMBER_KIND["trailer"], body, zlib.crc32(body))
        finally:
            self._f.close()
            self._f = None
            self._known.clear()


class _Job:
    __slots__ = ("nbytes", "run", "storage")

    def __init__(self, run: Callable[[], None], nbytes: int, storage: int | None) -> None:
        self.run, self.nbytes, self.storage = run, nbytes, storage


class _Payload:
    """A storage span until the writer thread has hashed and written it, then its digest."""

    __slots__ = ("digest", "fresh", "nbytes", "span")

    def __init__(self, span: Span) -> None:
        self.span: Span | None = span
        self.nbytes = span.nbytes
        self.digest: str | None = None
        self.fresh = True  # not yet counted against the writer's buffer

    def resolve(self, writer: TraceWriter) -> str:
        """The digest (hashing and writing the bytes on first use, then letting the storage go)."""
        if self.digest is None:
            assert self.span is not None
            self.digest = writer._store(self.span.buffer)
            self.span = None
        return self.digest


def _storage_ptr(t: torch.Tensor) -> int | None:
    try:
        return int(t.untyped_storage().data_ptr())
    except (RuntimeError, NotImplementedError):
        return None


def _version_of(t: torch.Tensor) -> int:
    """torch's version counter of `t` (bumped by every in-place write, recorded or not); -1 when untracked."""
    try:
        return int(t._version)
    except RuntimeError:  # inference tensors keep no version counter
        return -1


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
        while pos < self._size:
            if idx.end is not None:
                raise DecodeError(f"{self.source}: {self._size - pos} bytes after the end frame at byte {pos}")
            if self._size - pos < _FRAME.size:
                idx.cut = self._cut(idx, pos, "inside a frame header")
                break
            self._f.seek(pos)
            kind, size, check = _FRAME.unpack(self._f.read(_FRAME.size))
            body = pos + _FRAME.size
            if size > self._size - body:
                what = "a payload frame" if kind == _PAYLOAD else f"a {_KIND_MEMBER.get(kind, 'frame')} frame"
                idx.cut = self._cut(idx, pos, f"inside {what} ({size} bytes announced, {self._size - body} there)")
                break
            self._take(idx, kind, body, size, check, pos)
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

    def _take(self, idx: _Index, kind: bytes, body: int, size: int, check: int, pos: int) -> None:
        if kind in (_PAYLOAD, _MEMBER_KIND["record"]):
            self._budget.spend(1, f"{self.source}: frames indexed and values decoded on open", f"byte {pos}")
        if kind == _PAYLOAD:
            if size < _DIGEST:
                raise DecodeError(f"{self.source}: payload frame at byte {pos} is shorter than its digest")
            digest = self._f.read(_DIGEST)
            if zlib.crc32(digest) != check:
                raise DecodeError(f"{self.source}: corrupt payload frame at byte {pos} (digest check failed)")
            idx.payloads[digest.hex()] = (body + _DIGEST, size - _DIGEST)
            return
        member = _KIND_MEMBER.get(kind)
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
            idx.tensors[frame.tensor.name] = frame.tensor
        elif frame.freed is not None:
            idx.freed.setdefault(len(idx.records) - 1, []).extend(frame.freed.objects)
        elif frame.trailer is not None:
            idx.end = frame.trailer
        elif frame.group is not None:
            idx.groups.append(frame.group)

    def _decode(
        self, body: int, size: int, check: int, member: str, pos: int, budget: budgets.Budget | int
    ) -> m.TraceFrame:
        self._f.seek(body)
        data = self._f.read(size)
        if zlib.crc32(data) != check:
            raise DecodeError(f"{self.source}: corrupt {member} frame at byte {pos} (CRC-32 check failed)")
        where = f"{self.source}@{pos}"
        frame = thrift.decode(data, m.TraceFrame, "compact", framed=False, source=where, max_elements=budget)
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
        rec = self._decode(body, size, check, "record", body - _FRAME.size, self.max_elements).record
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

    def nbytes(self, name: str) -> int:
        """Payload bytes of tensor `name` (0 for empty or digest-only tensors)."""
        entry = self._index.tensors.get(name)
        if entry is None or entry.payload is None:
            return 0
        return self._index.payloads.get(entry.payload, (0, 0))[1]

    def load(self, name: str, device: Any = None) -> torch.Tensor:
        """Rebuild tensor `name` from its payload (the payload's SHA-256 checked on first read)."""
        from opwire.recording.payloads import rebuild_span  # deferred: torch; reading records needs none

        where = f"{self.source}: tensors[{name!r}]"
        entry = self._index.tensors.get(name)
        if entry is None:
            raise DecodeError(f"{where}: the trace names this tensor but holds no entry for it")
        meta = entry.value
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

    def verify(self) -> tuple[int, int]:
        """Check every payload's SHA-256 and every record frame's CRC-32 (read once, in chunks); (payloads, records).

        A payload whose bytes do not match its digest is a DecodeError naming its byte offset and the tensors
        that use it.
        """
        for i, (body, size, check) in enumerate(self._index.records):
            self._f.seek(body)
            if zlib.crc32(self._f.read(size)) != check:
                raise DecodeError(f"{self.source}: record {i} at byte {body - _FRAME.size} fails its CRC-32 check")
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

    def __enter__(self) -> TraceReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
