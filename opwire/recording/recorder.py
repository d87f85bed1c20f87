"""`opwire.record`: capture the operator calls of eager code as a `CallTrace`; `Trace`, `load_trace`.

with opwire.record() as trace:
    loss = model(x).sum(); loss.backward(); opt.step()
trace.save("step.trace")                 # compact Thrift with opwire's header
opwire.load_trace("step.trace")          # -> opwire.Trace
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Literal

import torch

from opwire.errors import DecodeError
from opwire.recording.mode import RecorderMode
from opwire.schema import models as m
from opwire.schema.models import SCHEMA_VERSION

__all__ = ["Trace", "load_trace", "record"]

OutputsMode = Literal["full", "digest"]


class Trace:
    """A recorded call trace: a thin wrapper around the generated `CallTrace` model."""

    def __init__(self, model: m.CallTrace | None = None) -> None:
        self._model = model

    @property
    def model(self) -> m.CallTrace:
        """The `CallTrace` model (available once the `record` block has ended)."""
        if self._model is None:
            raise RuntimeError("the trace is still being recorded; use it after the `with opwire.record()` block")
        return self._model

    @property
    def records(self) -> list[m.CallRecord]:
        """The recorded calls, in the order they ran."""
        return self.model.records

    @property
    def header(self) -> m.TraceHeader:
        """Versions, outputs mode and the schema string of every op used."""
        return self.model.header

    @property
    def tensors(self) -> dict[str, m.TensorValue]:
        """The tensor table: every tensor value a record names."""
        return self.model.tensors

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[m.CallRecord]:
        return iter(self.records)

    def __repr__(self) -> str:
        if self._model is None:
            return "Trace(<recording>)"
        ops = Counter(r.target for r in self.records).most_common(3)
        top = ", ".join(f"{k} x{v}" for k, v in ops)
        return f"Trace({len(self)} calls, {len(self.tensors)} tensors; {top})"

    def dumps(self, format: str = "compact") -> bytes:
        """The trace as bytes: "json", or "binary"/"compact" Thrift with opwire's header."""
        from opwire.serde import dumps

        return dumps(self.model, format=format)  # type: ignore[arg-type]

    def save(self, path: str | Path, format: str = "compact") -> None:
        """Write the trace to `path` ("json", "binary" or "compact")."""
        Path(path).write_bytes(self.dumps(format))

    @classmethod
    def loads(cls, data: bytes, source: str = "", *, max_elements: int | None = None) -> Trace:
        """Read a trace from bytes: JSON or Thrift with opwire's header (the codec is taken from it)."""
        return cls(_decode(data, source or "trace", max_elements))


def _decode(data: bytes, source: str, max_elements: int | None = None) -> m.CallTrace:
    from opwire.serde import budgets, framing, thrift
    from opwire.serde import json as _json

    limit = budgets.MAX_ELEMENTS if max_elements is None else max_elements
    _check_kind(data, source)
    if framing.has_header(data):
        header = framing.read_header(data, source)
        return thrift.decode(data, m.CallTrace, header.codec, source=source, max_elements=limit)  # type: ignore[arg-type]
    return _json.decode(data, m.CallTrace, source=source, max_elements=limit)


def _check_kind(data: bytes, source: str) -> None:
    """DecodeError unless `data` (or its first bytes) starts like a trace: opwire's header or a JSON object."""
    from opwire.serde import framing

    if framing.has_header(data) or data.lstrip()[:1] == b"{":
        return
    raise DecodeError(
        f"{source}: Expected a trace (JSON, or Thrift with opwire's header), got {len(data)} bytes starting "
        f"{bytes(data[:8])!r}; write traces with Trace.save or `opwire record`"
    )


def load_trace(path: str | Path, *, max_elements: int | None = None) -> Trace:
    """Read a trace file that `Trace.save` or `opwire record` wrote (any format), within the decoding budgets."""
    from opwire.serde.files import read_head, read_input

    _check_kind(read_head(path), str(path))  # a device or a stranger's file is refused before it is read
    return Trace.loads(read_input(path, what="trace"), str(path), max_elements=max_elements)


@contextlib.contextmanager
def record(
    include: Sequence[str] | None = None,
    exclude: Sequence[str] = (),
    outputs: OutputsMode = "full",
    write_defaults: bool = True,
) -> Iterator[Trace]:
    """Record every dispatcher call in the block (fnmatch patterns on "ns::op.overload" filter them)."""
    if outputs not in ("full", "digest"):
        raise ValueError(f"outputs must be 'full' or 'digest', got {outputs!r}")
    if isinstance(include, str) or isinstance(exclude, str):
        raise TypeError("include/exclude take a list of patterns such as ['aten::*'], not a single string")
    trace = Trace()
    mode = RecorderMode(include, list(exclude), outputs == "digest", write_defaults)
    with mode:
        yield trace
    trace._model = _finish(mode, outputs)


def _finish(mode: RecorderMode, outputs: str) -> m.CallTrace:
    from opwire._version import __version__

    header = m.TraceHeader(
        opwire_version=__version__,
        torch_version=str(torch.__version__),
        op_schemas=dict(sorted(mode.op_schemas.items())),
        outputs_mode=outputs,
        schema_version=m.SchemaVersion(major=SCHEMA_VERSION[0], minor=SCHEMA_VERSION[1]),
    )
    tensors = {name: slot.materialize() for name, slot in mode.slots.items()}
    return m.CallTrace(header=header, records=mode.records, tensors=tensors)
