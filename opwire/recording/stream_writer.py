"""The writer of streamed traces: frames as the calls happen, payloads hashed and written by a writer thread."""

from __future__ import annotations

import hashlib
import queue
import threading
import weakref
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from opwire.errors import EncodeError
from opwire.program.outfiles import open_output
from opwire.recording.stream_frames import DIGEST, FRAME, MEMBER_KIND, PAYLOAD, ROOT
from opwire.schema import models as m
from opwire.serde import framing, thrift

if TYPE_CHECKING:
    import torch

    from opwire.recording.payloads import Span

__all__ = ["BUFFER_BYTES", "SNAPSHOT_BYTES", "TraceWriter"]

BUFFER_BYTES = 128 << 20
"""Payload bytes the writer thread may hold (tensors kept alive until written) before the recorder waits."""
SNAPSHOT_BYTES = 16 << 20
"""Payloads up to this size are copied whole before hashing; larger ones a chunk of this size at a time."""


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
        self._submit(lambda: self._write(MEMBER_KIND[member], body, zlib.crc32(body)))

    def _write(self, kind: bytes, body: bytes | memoryview, check: int, extra: memoryview | None = None) -> None:
        if self._f is None:
            raise EncodeError(f"{self.path}: the trace is already closed")
        size = len(body) + (len(extra) if extra is not None else 0)
        self._f.write(FRAME.pack(kind, size, check))
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
            self._write(MEMBER_KIND["tensor"], body, zlib.crc32(body))
            self.tensors += 1

        fresh = payload is not None and payload.fresh
        if fresh and payload is not None and payload.nbytes <= SNAPSHOT_BYTES:
            payload.take()  # the bytes as they are now: the program may free or reuse the memory outside the dispatcher
        pending = _storage_ptr(t) if fresh and payload is not None and payload.data is None else None
        self._submit(run, payload.nbytes if payload is not None and fresh else 0, pending)
        if payload is not None:
            payload.fresh = False

    def undefined(self, name: str, t: torch.Tensor | m.TensorValue) -> None:
        """Write the tensor entry `name` for `t` (or its layout), whose content is undefined: the marker, no payload."""
        if not isinstance(t, m.TensorValue):
            from opwire.recording.payloads import layout_of  # deferred: torch; reading a trace needs none

            t = layout_of(t, name)
        entry = m.TraceTensor(name=name, value=t, undefined=True)
        body = thrift.encode(m.TraceFrame(tensor=entry), "compact", framed=False)

        def run() -> None:
            self._write(MEMBER_KIND["tensor"], body, zlib.crc32(body))
            self.tensors += 1

        self._submit(run)

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
        from opwire.serde import tensors  # deferred: imports torch

        if not tv.data and tv.digest is not None:
            self._frame("tensor", m.TraceTensor(name=name, value=tv))
            self.tensors += 1
            return
        self.tensor(name, tensors.to_tensor(tv, "cpu", f"tensors[{name!r}]"), True)

    def _store(self, buffer: memoryview | bytes) -> str:
        """Writer thread: snapshot a payload, hash and write that snapshot unless the file holds those bytes already.

        The bytes hashed are the bytes written: memory the program writes meanwhile (another thread, a C++ hook
        such as DDP's reducer) cannot make the file disagree with its own digest. A payload above
        `SNAPSHOT_BYTES` is copied a chunk at a time, each chunk hashed and written, its digest filled in after.
        """
        if len(buffer) <= SNAPSHOT_BYTES:
            data = buffer if isinstance(buffer, bytes) else bytes(buffer)
            digest = hashlib.sha256(data).digest()
            if digest not in self._written:
                self._written.add(digest)
                self._write(PAYLOAD, digest, zlib.crc32(digest), memoryview(data))
                self._count_payload(len(data))
            return digest.hex()
        return self._store_chunked(memoryview(buffer))

    def _store_chunked(self, buffer: memoryview) -> str:
        assert self._f is not None
        start = self._f.tell()
        self._f.write(FRAME.pack(PAYLOAD, DIGEST + len(buffer), 0) + bytes(DIGEST))
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
        self._f.write(FRAME.pack(PAYLOAD, DIGEST + len(buffer), zlib.crc32(digest)) + digest)
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
            self._write(MEMBER_KIND["trailer"], body, zlib.crc32(body))
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

    __slots__ = ("data", "digest", "fresh", "nbytes", "span")

    def __init__(self, span: Span) -> None:
        self.span: Span | None = span
        self.nbytes = span.nbytes
        self.digest: str | None = None
        self.data: bytes | None = None  # the snapshot taken on the recording thread (`take`), if any
        self.fresh = True  # not yet counted against the writer's buffer

    def take(self) -> None:
        """Snapshot the bytes now, on the recording thread, and let the storage go: FSDP2 frees parameter memory
        with `untyped_storage().resize_(0)` and DDP's reducer writes buckets, both outside the dispatcher, so
        memory read later by the writer thread could hold other bytes, or none."""
        assert self.span is not None
        self.data = bytes(self.span.buffer)
        self.span = None

    def resolve(self, writer: TraceWriter) -> str:
        """The digest (hashing and writing the bytes on first use, then letting the storage go)."""
        if self.digest is None:
            if self.data is not None:
                self.digest, self.data = writer._store(self.data), None
            else:
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
