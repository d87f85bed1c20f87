"""Part of a streamed trace's index handed from the process that scanned the file to processes that did not.

`FrameReader` scans a whole file on open (every frame's CRC-32, the frame kinds, the end frame). When several
processes split the checks of one run (`torchrun ... -m opwire ranks RUN`), the process that owns a rank scans its
file once; `IndexedReader.index_of` writes, as JSON, where the tensor frames and payloads of the tensors the other
processes will read sit in that file, and `IndexedReader` reads those tensors from it without scanning it again. Each
tensor frame is still decoded (CRC-32 and all) on first use, each payload checked against its SHA-256 on first read, so
what a tensor loads as, and every error a frame or payload raises there, is what a full scan's reader gives.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from opwire.errors import DecodeError
from opwire.recording.frames import FrameReader
from opwire.recording.stream_frames import read_stream_header
from opwire.recording.stream_reader import _Index
from opwire.schema import models as m

__all__ = ["IndexedReader"]


class IndexedReader(FrameReader):
    """A `FrameReader` of the tensors an `index_of` lists, its file not scanned again: tensor frames decoded and
    payloads checked on first use, as the scanning reader does. It holds no records, its header is the header frame
    alone (no op schema or group frame is read), and a tensor the index does not list is a caller's mistake (the
    index lists every tensor the owner's checks named): a KeyError."""

    @staticmethod
    def index_of(reader: FrameReader, names: Iterable[str]) -> dict[str, Any] | None:
        """Where `names`' tensor frames and payloads sit in `reader`'s file, as JSON: {"size": file bytes, "tensors":
        {name: [body, length, crc, frame position] or None where the trace has no such tensor}, "payloads": {digest:
        [offset, length]}}. None when a tensor's frame was decoded on open (not laid out as the writer lays it out, or
        larger than the light index takes): the reader of another process then scans the file itself."""
        tensors: dict[str, list[int] | None] = {}
        payloads: dict[str, list[int]] = {}
        for name in dict.fromkeys(names):
            entry = reader.entry(name)  # decoded here (as the checks would decode it): its digest names its payload
            loc = reader._where.get(name)
            if entry is None:
                tensors[name] = None
                continue
            if loc is None:
                return None
            tensors[name] = list(loc)
            found = reader._index.payloads.get(entry.payload) if entry.payload is not None else None
            if entry.payload is not None and found is not None:
                payloads[entry.payload] = list(found)
        return {"size": reader._size, "tensors": tensors, "payloads": payloads}

    def __init__(self, path: str | Path, index: dict[str, Any]) -> None:
        self._given = index
        super().__init__(path)

    def _scan(self) -> Any:
        index = self._given
        if int(index["size"]) != self._size:
            raise DecodeError(
                f"{self.source}: {self._size} bytes, {index['size']} when another process indexed it; the file "
                "changed while the run was checked"
            )
        header = read_stream_header(self.path)
        if header is None:
            raise DecodeError(f"{self.source}: no longer a streamed trace; the file changed while the run was checked")
        idx = _Index(header=header)
        for name, loc in index["tensors"].items():
            if loc is not None:
                body, size, check, pos = (int(x) for x in loc)
                self._lazy[name] = self._where[name] = (body, size, check, pos)
                self._order[name] = None
        idx.payloads = {d: (int(o), int(n)) for d, (o, n) in index["payloads"].items()}
        self._listed = frozenset(index["tensors"])
        return idx

    def entry(self, name: str) -> m.TraceTensor | None:
        """The tensor frame of `name`, decoded on first use (None when the owner's scan found none)."""
        if name not in self._listed:
            raise KeyError(f"{self.source}: tensor {name!r} is not in the index handed over (only {len(self._listed)})")
        return super().entry(name)
