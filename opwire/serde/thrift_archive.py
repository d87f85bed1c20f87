"""An `OpwireArchive` sent as one Thrift blob (binary or compact, with opwire's header), opened from its file mapped.

`open(path)` maps the file copy-on-write (`_archive.mapping.MappedFile`) and walks the archive's bytes once: every
tensor payload (`TensorValue.data` in `weights` and `constants`) is noted as an (offset, length) in the
mapping and stepped over, never copied. What is left (the program, the tensors' metadata, the examples: a
small copy of everything else, each payload cut to an empty string) is read by the one strict Thrift decoder,
so a bad program, dtype or shape says what the decoder says. `tensors()` then views each contiguous, aligned
payload in place (`torch.frombuffer` over the mapping, pages read when an op touches them). opwire's writer pads
every payload to a multiple of 64 in the file (records 1.7, serde/_padding.py), so each contiguous one is viewed;
in a file written before 1.7, a contiguous payload not aligned for its dtype is read straight from the file
into a new tensor (`os.preadv`: the mapping's pages
are never touched for it, so it costs its bytes once), and a non-contiguous layout or a big-endian host gets
a checked copy. Every offset and length is
checked against the file before anything is viewed: a hostile one is a `DecodeError` naming the tensor.
"""

from __future__ import annotations

import builtins
import ctypes
import os
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from opwire.errors import DecodeError
from opwire.schema import models as m
from opwire.serde import budgets, framing, thrift
from opwire.serde._archive.mapping import MAPPABLE, Buffer, MappedFile, TensorLayout, view_tensor
from opwire.serde._thrift import tables
from opwire.serde.tensor_layout import contiguous_strides
from opwire.serde.tensor_tables import Table, check_table

if TYPE_CHECKING:
    import torch

__all__ = ["ThriftArchive", "open"]

_EMPTY = {"binary": b"\x00\x00\x00\x00", "compact": b"\x00"}  # a zero-length string in each codec

Span = tuple[int, int]  # (offset in the file, length) of one payload


class ThriftArchive:
    """A framed Thrift `OpwireArchive` file: payloads mapped, the rest decoded on first use."""

    def __init__(self, path: str | Path, *, max_elements: int = budgets.MAX_ELEMENTS) -> None:
        self.path = Path(path)
        self._src = str(self.path)
        self.max_elements = max_elements
        before = _identity(self.path, self._src)
        self._file: MappedFile | None = MappedFile(self.path)
        self._identity = _identity(self.path, self._src)
        if self._identity != before or self._identity[2] != self._file.size:
            raise DecodeError(f"{self._src}: the file changed while it was being opened; open it again")
        buffer = self._file.buffer
        header = framing.read_header(memoryview(buffer)[:256], self._src)
        if header.root != "OpwireArchive":
            raise DecodeError(f"{self._src}: holds a {header.root}, not an OpwireArchive")
        self.codec = header.codec
        self._start = header.offset
        self.spans, self._cuts = _scan(buffer, header.offset, header.codec, self._src, max_elements)

    @cached_property
    def _meta(self) -> m.OpwireArchive:
        """Everything but the payloads: the file with each payload cut to an empty string, strictly decoded."""
        buffer = self._buffer()
        view, at = memoryview(buffer), 0
        pieces: list[memoryview | bytes] = []
        for start, end in self._cuts:
            pieces += [view[at:start], _EMPTY[self.codec]]
            at = end
        pieces.append(view[at:])
        codec: Any = self.codec
        meta = thrift.decode(
            b"".join(pieces), m.OpwireArchive, codec, framed=True, source=self._src, max_elements=self.max_elements
        )
        for table in ("weights", "constants"):
            if set(getattr(meta, table)) != set(self.spans[table]):
                raise DecodeError(f"{self._src}: the {table} the decoder read differ from those found in the file")
        return meta

    def _buffer(self) -> Buffer:
        if self._file is None:
            raise DecodeError(f"{self._src}: the archive was closed")
        return self._file.buffer

    @property
    def program(self) -> m.ExportedProgram:
        """The exported program (no payload read)."""
        return self._meta.program

    def names(self, table: Table) -> list[str]:
        """Names of the weights or constants, in the order the file holds them."""
        return list(getattr(self._meta, check_table(table)))

    def locations(self, table: Table) -> dict[str, Span]:
        """Weight or constant name -> (offset, length) of its payload in the file, without reading any."""
        spans = self.spans[check_table(table)]
        return {n: spans.get(n, (0, 0)) for n in getattr(self._meta, table)}

    def value(self, table: Table, name: str) -> m.TensorValue:
        """Weight or constant `name` as a TensorValue (its bytes copied once)."""
        tv = getattr(self._meta, check_table(table)).get(name)
        if tv is None:
            raise DecodeError(f"{self._src}: no {table[:-1]} named {name!r}", f"{table}[{name!r}]")
        start, length = self.spans[table].get(name, (0, 0))
        if not length:
            return tv  # type: ignore[no-any-return]
        return tv.model_copy(update={"data": bytes(memoryview(self._buffer())[start : start + length])})  # type: ignore[no-any-return]

    def tensor(self, table: Table, name: str, device: str | torch.device | None = None) -> torch.Tensor:
        """Weight or constant `name` (`table` "weights" or "constants"): a view of the mapped file when its payload
        is contiguous and aligned for its dtype, else a copy."""
        from opwire.serde import tensors  # deferred: imports torch (the program and `value` need none)

        table = check_table(table)
        where = f"{table}[{name!r}]"
        tv = getattr(self._meta, table).get(name)
        if tv is None:
            raise DecodeError(f"{self._src}: no {table[:-1]} named {name!r}", where)
        start, length = self.spans[table].get(name, (0, 0))
        dtype = tensors.torch_dtype(tv.dtype, f"{where}.dtype")
        sizes, strides = list(tv.sizes), list(tv.strides)
        numel = tensors.check_numel(sizes, contiguous_strides(sizes), 0, dtype.itemsize, where)
        in_place = MAPPABLE and tv.storage_offset == 0 and strides == contiguous_strides(sizes)
        if in_place and length == numel * dtype.itemsize:
            if start % dtype.itemsize:  # unaligned: read into a tensor of its own, the mapping left untouched
                import torch  # deferred: see `tensors` above

                target = tensors.target_device(tv, device, where)
                out = self._read_into(start, length, torch.empty(sizes, dtype=dtype), where)
                return tensors.place(out, target, tv.requires_grad, where)
            layout = TensorLayout(tv.dtype, sizes, strides, 0, tv.device, tv.requires_grad)
            try:
                return view_tensor(self._buffer(), start, length, layout, where, device)
            except DecodeError as exc:
                raise DecodeError(f"{self._src}: {exc}", exc.path) from None
        return tensors.shared_tensor(self.value(table, name), device, where)  # restrided (or big-endian): a copy

    def _read_into(self, start: int, length: int, out: torch.Tensor, where: str) -> torch.Tensor:
        """`length` bytes at `start` of the file (the one mapped: same device, inode and size) into `out`."""
        if start < 0 or start + length > len(self._buffer()):
            raise DecodeError(f"{self._src}: {length} bytes at offset {start} end past the file - at `{where}`", where)
        into = memoryview((ctypes.c_char * length).from_address(out.data_ptr())).cast("B") if length else None
        with builtins.open(self.path, "rb", buffering=0) as f:
            st = os.fstat(f.fileno())
            if (st.st_dev, st.st_ino, st.st_size) != self._identity:
                raise DecodeError(f"{self._src}: the file changed since it was opened; open it again")
            done = 0
            while into is not None and done < length:
                n = os.preadv(f.fileno(), [into[done:]], start + done)
                if n <= 0:
                    raise DecodeError(f"{self._src}: the file ended while reading `{where}`; it was truncated", where)
                done += n
        return out

    def tensors(
        self, device: str | torch.device | None = None
    ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """(weights, constants) as tensors, each viewing the mapped file where it can (see `tensor`)."""
        if self._file is not None:
            self._file.check()
        meta = self._meta
        return (
            {n: self.tensor("weights", n, device) for n in meta.weights},
            {n: self.tensor("constants", n, device) for n in meta.constants},
        )

    def verify(self) -> None:
        """Check that the file is unchanged since it was mapped (a Thrift archive carries no checksums)."""
        if self._file is not None:
            self._file.check()

    def materialize(self) -> m.OpwireArchive:
        """Everything as an OpwireArchive (each payload copied once)."""
        meta = self._meta
        return meta.model_copy(
            update={
                "weights": {n: self.value("weights", n) for n in meta.weights},
                "constants": {n: self.value("constants", n) for n in meta.constants},
            }
        )

    def close(self) -> None:
        """Drop this archive's reference to the mapping (tensors already returned keep it alive)."""
        self._file = None

    def __enter__(self) -> ThriftArchive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open(path: str | Path, *, max_elements: int = budgets.MAX_ELEMENTS) -> ThriftArchive:
    """Open a framed Thrift OpwireArchive file: payloads found and mapped now, the rest decoded on first use."""
    return ThriftArchive(path, max_elements=max_elements)


def _identity(path: Path, src: str) -> tuple[int, int, int]:
    try:
        st = os.stat(path)
    except OSError as exc:
        raise DecodeError(f"{src}: cannot stat ({exc.strerror or exc})") from None
    return st.st_dev, st.st_ino, st.st_size


def _scan(
    buffer: Buffer, start: int, codec: str, src: str, max_elements: int
) -> tuple[dict[str, dict[str, Span]], list[Span]]:
    """Walk the archive once: each table's payload spans by tensor name, and the byte ranges to cut (each payload
    with its length prefix), in file order."""
    found = tables.scan(buffer, start, codec, src, max_elements, framing.MAX_DEPTH)
    spans = {
        t: {n: (e.data, e.length) if e.prefix >= 0 else (0, 0) for n, e in entries.items()}
        for t, entries in found.items()
    }
    cuts = sorted(
        (e.prefix, e.data + e.length) for entries in found.values() for e in entries.values() if e.prefix >= 0
    )
    return spans, cuts
