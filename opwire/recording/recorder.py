"""`opwire.record`: capture the operator calls of eager code; `Trace`, `load_trace`.

with opwire.record() as trace:                       # in memory: for small traces
    loss = model(x).sum(); loss.backward(); opt.step()
trace.save("step.trace")                              # compact Thrift with opwire's header

with opwire.record(path="step.trace") as trace:      # streamed to disk as the calls happen
    ...
opwire.load_trace("step.trace")                       # either form -> opwire.Trace
"""

from __future__ import annotations

import contextlib
import tempfile
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Literal

import torch

from opwire import program
from opwire._version import __version__
from opwire.errors import DecodeError
from opwire.program import StreamedTrace
from opwire.program.outfiles import write_output
from opwire.recording.dispatch_mode import RecorderMode
from opwire.recording.launch import launch_info, rank_path
from opwire.recording.locate import Locator
from opwire.recording.mutations import written_arguments
from opwire.recording.payloads import tensor_value
from opwire.recording.progress import Progress
from opwire.recording.sinks import MemorySink
from opwire.recording.source import ModelSource, StreamSource, TraceSource
from opwire.recording.stream_frames import is_stream
from opwire.recording.stream_writer import TraceWriter
from opwire.schema import models as m
from opwire.schema.models import SCHEMA_VERSION
from opwire.schema.refs import tensor_names
from opwire.serde import budgets, dumps, framing, json, thrift
from opwire.serde.json import is_document_head

__all__ = ["Trace", "load_trace", "record"]

OutputsMode = Literal["full", "digest"]
FORMATS = ("compact", "binary", "json", "stream")


class Trace:
    """A recorded call trace, in memory (a `CallTrace` model) or backed by a streamed file."""

    def __init__(self, model: m.CallTrace | None = None, *, source: TraceSource | None = None) -> None:
        if source is None and model is not None:
            source = ModelSource(model)
        self._source = source
        self._records: list[m.CallRecord] | None = None
        self.label: str | None = None
        """The file this trace was loaded from, as the caller named it (None for one recorded in memory)."""

    @property
    def source(self) -> TraceSource:
        """What replay and diff read (available once the `record` block has ended)."""
        if self._source is None:
            raise RuntimeError("the trace is still being recorded; use it after the `with opwire.record()` block")
        return self._source

    @property
    def model(self) -> m.CallTrace:
        """The whole trace as a `CallTrace` model (a streamed trace is read into memory for it)."""
        src = self.source
        if isinstance(src, ModelSource):
            return src.model
        tensors = {n: self._value(n) for n in src.names()}
        return m.CallTrace(header=src.header, records=self.records, tensors=tensors)

    def _value(self, name: str) -> m.TensorValue:

        meta = self.source.meta(name)
        if meta is not None and meta.digest is not None and not meta.data and self.source.nbytes(name) == 0:
            return meta
        return tensor_value(self.source.load(name, "cpu"), True, name)

    @property
    def path(self) -> Path | None:
        """The streamed file behind this trace (None for an in-memory trace)."""
        return self.source.path

    @property
    def cut(self) -> str | None:
        """Where a streamed trace cut by a crash ends (None when it is complete)."""
        return self.source.cut

    @property
    def records(self) -> list[m.CallRecord]:
        """The recorded calls, in the order they ran."""
        src = self.source
        if isinstance(src, ModelSource):
            return src.model.records
        if self._records is None:
            self._records = list(src.records())
        return self._records

    @property
    def header(self) -> m.TraceHeader:
        """Versions, outputs mode and the schema string of every op used."""
        return self.source.header

    @property
    def tensors(self) -> dict[str, m.TensorValue]:
        """The tensor table as TensorValues (a streamed trace is read into memory for it)."""
        return self.model.tensors

    def names(self) -> list[str]:
        """Every tensor name the trace holds."""
        return self.source.names()

    def tensor(self, name: str) -> torch.Tensor:
        """The recorded value of tensor `name` as a torch.Tensor (its strides and storage offset kept)."""
        if self.source.meta(name) is None:
            raise KeyError(f"the trace has no tensor {name!r}")
        return self.source.load(name)

    def set_tensor(self, name: str, value: torch.Tensor) -> None:
        """Replace the recorded value of tensor `name` (replay and diff then see `value`)."""
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"expected a torch.Tensor, got {type(value).__name__}")
        if self.source.meta(name) is None:
            raise KeyError(f"the trace has no tensor {name!r}")
        self.source.replace(name, value)

    def __len__(self) -> int:
        return len(self.source)

    def __iter__(self) -> Iterator[m.CallRecord]:
        return self.source.records()

    def __repr__(self) -> str:
        if self._source is None:
            return "Trace(<recording>)"
        ops = Counter(r.target for r in self.source.records()).most_common(3)
        top = ", ".join(f"{k} x{v}" for k, v in ops)
        where = f", streamed from {self.path}" if self.path is not None else ""
        return f"Trace({len(self)} calls, {len(self.names())} tensors; {top}{where})"

    def dumps(self, format: str = "compact") -> bytes:
        """The trace as bytes: "json", or "binary"/"compact" Thrift with opwire's header."""

        return dumps(self.model, format=format)  # type: ignore[arg-type]

    def save(self, path: str | Path, format: str = "compact") -> None:
        """Write the trace to `path`: "compact", "binary", "json" (in memory), or "stream" (frame by frame)."""
        if format not in FORMATS:
            raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {format!r}")
        if format != "stream":
            write_output(path, self.dumps(format))
            return
        src = self.source
        writer = TraceWriter(path, src.header.model_copy(update={"op_schemas": {}}))
        try:
            for op, schema in src.header.op_schemas.items():
                writer.op_schema(op, schema)
            written: set[str] = set()
            writer.freed(src.freed_after(-1))
            for i, rec in enumerate(src.records()):
                for n in _names_of(rec):
                    if n not in written:
                        written.add(n)
                        self._write_tensor(writer, n)
                writer.record(rec)
                writer.freed(src.freed_after(i))
            for n in src.names():
                if n not in written:
                    self._write_tensor(writer, n)
        finally:
            writer.close()

    def _write_tensor(self, writer: TraceWriter, name: str) -> None:
        meta = self.source.meta(name)
        if meta is None:
            return
        if self.source.undefined(name):
            writer.undefined(name, meta)
        elif meta.digest is not None and self.source.nbytes(name) == 0 and not meta.data:
            writer.tensor_value(name, meta)
        else:
            writer.tensor(name, self.source.load(name, "cpu"), True)

    def stream_path(self) -> tuple[Path, bool]:
        """A streamed file holding exactly this trace, and whether it is a temporary copy to delete."""
        src = self.source
        if isinstance(src, StreamSource) and not src.replaced and src.path is not None:
            return src.path, False
        fd, tmp = tempfile.mkstemp(suffix=".trace", prefix="opwire-")
        import os

        os.close(fd)
        self.save(tmp, format="stream")
        return Path(tmp), True

    @classmethod
    def loads(cls, data: bytes, source: str = "", *, max_elements: int | None = None) -> Trace:
        """Read an in-memory trace from bytes: JSON or Thrift with opwire's header (the codec is taken from it)."""
        return cls(_decode(data, source or "trace", max_elements))


def _names_of(rec: m.CallRecord) -> list[str]:

    names = [n for na in rec.inputs for n in tensor_names(na.arg)]
    names += [n for a in rec.outputs for n in tensor_names(a)]
    try:
        names += [n for ns in written_arguments(rec, f"call {rec.target}").values() for n in ns]
    except DecodeError:
        pass  # what the call names is best effort here: replay reports the bad metadata with its place
    return names


def _decode(data: bytes, source: str, max_elements: int | None = None) -> m.CallTrace:

    limit = budgets.MAX_ELEMENTS if max_elements is None else max_elements
    if is_stream(data[:256]):
        raise DecodeError(f"{source}: a streamed trace; read it with opwire.load_trace(path)")
    _check_kind(data, source)
    if framing.has_header(data):
        header = framing.read_header(data, source)
        return thrift.decode(data, m.CallTrace, header.codec, source=source, max_elements=limit)  # type: ignore[arg-type]
    return json.decode(data, m.CallTrace, source=source, max_elements=limit)


def _check_kind(data: bytes, source: str) -> None:
    """DecodeError unless `data` (or its first bytes) starts like a trace: opwire's header or a JSON object."""

    if is_document_head(data):
        return
    raise DecodeError(
        f"{source}: Expected a trace (JSON, or Thrift with opwire's header), got {len(data)} bytes starting "
        f"{bytes(data[:8])!r}; write traces with Trace.save or `opwire record`"
    )


def load_trace(path: str | Path, *, max_elements: int | None = None, max_bytes: int | None = None) -> Trace:
    """Read a trace file that `Trace.save`, `opwire.record(path=...)` or `opwire record` wrote (any format).

    A streamed trace is opened, not read: records and tensors are read from the file when used, and what
    opening keeps is bounded by one `max_elements` and `max_bytes` budget for all its frames. Any other
    trace is read within the same budgets (through `opwire.program.open`, as every file is).
    """

    opened = program.open(path, expect="trace", max_elements=max_elements, max_bytes=max_bytes)
    if isinstance(opened, StreamedTrace):
        trace = Trace(source=StreamSource(opened.path, max_elements=max_elements, max_bytes=max_bytes))
    else:
        trace = Trace(opened)
    trace.label = str(path)
    return trace


def _header(outputs: str) -> m.TraceHeader:

    return m.TraceHeader(
        distributed=launch_info(),
        opwire_version=__version__,
        torch_version=str(torch.__version__),
        op_schemas={},
        outputs_mode=outputs,
        schema_version=m.SchemaVersion(major=SCHEMA_VERSION[0], minor=SCHEMA_VERSION[1]),
    )


@contextlib.contextmanager
def record(
    include: Sequence[str] | None = None,
    exclude: Sequence[str] = (),
    outputs: OutputsMode = "full",
    write_defaults: bool = True,
    path: str | Path | None = None,
    progress: bool | None = None,
    locations: bool = True,
) -> Iterator[Trace]:
    """Record every dispatcher call in the block (fnmatch patterns on "ns::op.overload" filter them).

    With `path`, the trace streams to that file as the calls happen (memory stays bounded) and the
    trace object reads it back after the block. `progress` draws a count on a terminal (None: when
    stderr is one); `locations` records each call's source line and `nn.Module` name.
    """
    if outputs not in ("full", "digest"):
        raise ValueError(f"outputs must be 'full' or 'digest', got {outputs!r}")
    if isinstance(include, str) or isinstance(exclude, str):
        raise TypeError("include/exclude take a list of patterns such as ['aten::*'], not a single string")
    if path is not None:
        path = rank_path(path)
    trace = Trace()
    sink: MemorySink | TraceWriter = MemorySink() if path is None else TraceWriter(path, _header(outputs))
    bar = Progress("recording", enabled=progress)
    locator = Locator() if locations else None
    mode = RecorderMode(include, list(exclude), outputs == "digest", write_defaults, sink, bar, locator)
    if locator is not None:
        locator.start()
    try:
        with mode:
            yield trace
    finally:
        if locator is not None:
            locator.stop()
        mode.finish()
        bar.close()
        if isinstance(sink, TraceWriter):
            sink.close()
    if isinstance(sink, TraceWriter):
        trace._source = StreamSource(sink.path)
    else:
        header = _header(outputs).model_copy(update={"op_schemas": dict(sorted(sink.op_schemas.items()))})
        if header.distributed is not None:
            header.distributed.groups = list(sink.groups)
        trace._source = ModelSource(m.CallTrace(header=header, records=sink.records, tensors=sink.tensors))
