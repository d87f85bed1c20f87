"""One read interface over both trace forms: records one at a time, tensor metadata, tensors on demand.

`ModelSource` wraps an in-memory `CallTrace`; `StreamSource` wraps a streamed file (a `TraceReader`)
and keeps replaced tensors in memory. Each source says which open files it reads from (`descriptors()`), so a
sandboxed child that reads it keeps exactly those. Replay and diff read only through this interface, so a streamed
trace is never loaded whole.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from opwire.errors import DecodeError
from opwire.recording.payloads import ByteCheck, span_of, tensor_value
from opwire.recording.stream_reader import TraceReader
from opwire.recording.tensor_names import object_of
from opwire.schema import models as m
from opwire.schema.refs import tensor_names
from opwire.serde import tensors

__all__ = ["ModelSource", "StreamSource", "TraceSource", "last_uses"]


class TraceSource:
    """What replay and diff read: header, records by index, tensor metadata and values."""

    path: Path | None = None
    cut: str | None = None

    @property
    def header(self) -> m.TraceHeader:
        """Versions, outputs mode and op schemas."""
        raise NotImplementedError

    def __len__(self) -> int:
        raise NotImplementedError

    def record(self, i: int) -> m.CallRecord:
        """Record `i`."""
        raise NotImplementedError

    def records(self, start: int = 0, stop: int | None = None) -> Iterator[m.CallRecord]:
        """Records start..stop in order."""
        for i in range(start, len(self) if stop is None else min(stop, len(self))):
            yield self.record(i)

    def target(self, i: int) -> str:
        """The op of record `i` (a reader that can tell it without decoding the record overrides this)."""
        return self.record(i).target

    def payload_digest(self, name: str) -> str | None:
        """The SHA-256 (hex) of `name`'s stored bytes, checked against them; None where the source keeps none."""
        return None

    def same_bytes(self, name: str, t: torch.Tensor) -> bool:
        """Whether `t` holds the recorded payload of `name` byte for byte in its recorded layout (False: cannot
        tell without rebuilding it; a reader that can compare in place overrides this)."""
        return False

    def byte_check(self, name: str) -> ByteCheck | None:
        """`same_bytes` of `name` planned ahead, for a loop that checks many outputs (`payloads.ByteCheck`); None
        where the source has no plan (the full check then runs, as it always may)."""
        return None

    def names(self) -> list[str]:
        """Every tensor name."""
        raise NotImplementedError

    def meta(self, name: str) -> m.TensorValue | None:
        """Metadata of a tensor (its data may be empty), None when the trace lacks it."""
        raise NotImplementedError

    def load(self, name: str, device: Any = None) -> torch.Tensor:
        """The recorded value of tensor `name`, rebuilt with its layout."""
        raise NotImplementedError

    def nbytes(self, name: str) -> int:
        """Bytes a rebuilt `name` costs (for bounded caches)."""
        raise NotImplementedError

    def undefined(self, name: str) -> bool:
        """Whether the trace marks `name`'s content undefined: it holds no bytes for it (it loads as zeros)."""
        return False

    def freed_after(self, i: int) -> list[str]:
        """Tensor objects no record after `i` names (-1: before the first record)."""
        raise NotImplementedError

    def replace(self, name: str, value: torch.Tensor) -> None:
        """Replace the recorded value of tensor `name`."""
        raise NotImplementedError

    def descriptors(self) -> list[int]:
        """The open file descriptors this source reads from: what a sandboxed child that reads it must keep
        (`opwire.proxy_executor.isolate.run_in_child(keep=)`). Every source says (a wrapper asks what it wraps)."""
        raise NotImplementedError


class ModelSource(TraceSource):
    """An in-memory `CallTrace`."""

    def __init__(self, model: m.CallTrace) -> None:
        self.model = model
        self._freed: dict[int, list[str]] | None = None

    @property
    def header(self) -> m.TraceHeader:
        return self.model.header

    def __len__(self) -> int:
        return len(self.model.records)

    def record(self, i: int) -> m.CallRecord:
        return self.model.records[i]

    def names(self) -> list[str]:
        return list(self.model.tensors)

    def meta(self, name: str) -> m.TensorValue | None:
        return self.model.tensors.get(name)

    def load(self, name: str, device: Any = None) -> torch.Tensor:
        tv = self.model.tensors.get(name)
        if tv is None:
            raise DecodeError(f"the trace names tensor {name!r} but its tensor table has no entry for it")
        return tensors.to_tensor(tv, device, f"tensors[{name!r}]")

    def nbytes(self, name: str) -> int:
        tv = self.model.tensors.get(name)
        return len(tv.data) if tv is not None else 0

    def freed_after(self, i: int) -> list[str]:
        if self._freed is None:
            self._freed = last_uses(self.model.records)
        return self._freed.get(i, [])

    def replace(self, name: str, value: torch.Tensor) -> None:
        self.model.tensors[name] = tensor_value(value, True, name)

    def descriptors(self) -> list[int]:
        return []  # in memory: no file


class StreamSource(TraceSource):
    """A streamed trace file; replaced tensors live in memory beside it."""

    def __init__(
        self, path: str | Path, *, max_elements: int | None = None, max_bytes: int | None = None,
        reader: TraceReader | None = None,
    ) -> None:  # fmt: skip
        if reader is None:  # (a reader of no records is falsy)
            reader = TraceReader(path, max_elements=max_elements, max_bytes=max_bytes)
        self.reader = reader
        self.path = Path(path)
        self.cut = self.reader.cut
        self._header = self.reader.header
        self._replaced: dict[str, torch.Tensor] = {}

    @property
    def header(self) -> m.TraceHeader:
        return self._header

    @property
    def replaced(self) -> bool:
        """Whether any tensor was replaced (the file alone no longer says what the trace holds)."""
        return bool(self._replaced)

    def __len__(self) -> int:
        return len(self.reader)

    def record(self, i: int) -> m.CallRecord:
        return self.reader.record(i)

    def records(self, start: int = 0, stop: int | None = None) -> Iterator[m.CallRecord]:
        return self.reader.records(start, stop)

    def names(self) -> list[str]:
        return self.reader.names()

    def same_bytes(self, name: str, t: torch.Tensor) -> bool:
        return name not in self._replaced and self.reader.same_bytes(name, t)

    def byte_check(self, name: str) -> ByteCheck | None:
        return None if name in self._replaced else self.reader.byte_check(name, self._replaced)

    def meta(self, name: str) -> m.TensorValue | None:
        t = self._replaced.get(name)
        return span_of(t, name).meta if t is not None else self.reader.meta(name)

    def load(self, name: str, device: Any = None) -> torch.Tensor:
        t = self._replaced.get(name)
        if t is None:
            return self.reader.load(name, device)
        t = t.to(device) if device is not None else t
        out = torch.empty(0, dtype=t.dtype, device=t.device)  # a copy with the same strides and offset
        out.set_(t.untyped_storage().clone(), t.storage_offset(), t.shape, t.stride())  # type: ignore[no-untyped-call]
        return out

    def nbytes(self, name: str) -> int:
        t = self._replaced.get(name)
        return t.untyped_storage().nbytes() if t is not None else self.reader.nbytes(name)

    def undefined(self, name: str) -> bool:
        return name not in self._replaced and self.reader.undefined(name)

    def freed_after(self, i: int) -> list[str]:
        return self.reader.freed_after(i)

    def replace(self, name: str, value: torch.Tensor) -> None:
        if self.reader.meta(name) is None:
            raise KeyError(f"the trace has no tensor {name!r}")
        self._replaced[name] = value.detach()

    def descriptors(self) -> list[int]:
        return self.reader.descriptors()

    def close(self) -> None:
        """Close the file."""
        self.reader.close()


def last_uses(records: list[m.CallRecord]) -> dict[int, list[str]]:
    """Record index -> tensor objects named for the last time there."""
    last: dict[str, int] = {}
    for i, rec in enumerate(records):
        for na in rec.inputs:
            for n in tensor_names(na.arg):
                last[object_of(n)] = i
        for arg in rec.outputs:
            for n in tensor_names(arg):
                last[object_of(n)] = i
    out: dict[int, list[str]] = {}
    for obj, i in last.items():
        out.setdefault(i, []).append(obj)
    return out
