"""opwire's own archive on disk, `.opw`: a header, a tensor table, and 64-byte aligned blobs that are mapped.

`write(archive, path)` stores the program (with example inputs) as one JSON blob and every
weight and constant as the bytes of its storage; identical storages are stored once and identical
tensors are recorded as aliases. `open(path)` reads the header and table only; `.program` decodes the
program blob on first use and `tensors()` views each tensor over the file, mapped copy-on-write (the
file is never written). `read(path)` materializes an `OpwireArchive`. CRCs are checked on demand
(`verify=True`, `verify()`). docs/wire-format.md gives the layout byte by byte.
"""

from __future__ import annotations

import builtins
import os
import stat
import zlib
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from opwire._version import __version__
from opwire.errors import DecodeError, EncodeError
from opwire.schema import models as m
from opwire.serde import budgets, json
from opwire.serde._archive import opw_table
from opwire.serde._archive.mapping import MAPPABLE, Buffer, MappedFile, view_tensor
from opwire.serde.tensor_tables import ProgramTables, Table, check_table

if TYPE_CHECKING:
    import torch

__all__ = ["MAGIC", "OpwArchive", "is_opw", "open", "read", "write"]

MAGIC = opw_table.MAGIC
_MAX_TABLE = 1 << 30


def is_opw(path: str | Path) -> bool:
    """Whether `path` is a regular file starting with the .opw magic."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False
        with builtins.open(path, "rb") as f:
            return f.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


class OpwArchive:
    """A .opw archive opened lazily: header and table now, the program on first use, tensors mapped on demand."""

    def __init__(
        self,
        path: str | Path,
        *,
        verify: bool = False,
        mmap: bool = True,
        max_elements: int = budgets.MAX_ELEMENTS,
    ) -> None:
        self.path = Path(path)
        self._src = str(self.path)
        self.max_elements = max_elements
        self.check_crc = verify
        try:
            with builtins.open(self.path, "rb") as f:
                st = os.fstat(f.fileno())
                if not stat.S_ISREG(st.st_mode):
                    raise DecodeError(f"{self._src}: not a regular file; a .opw archive is one")
                self.size = st.st_size
                self.header = opw_table.parse_header(f.read(opw_table.HEADER.size), self.size, self._src)
                if self.header.table_length > _MAX_TABLE:
                    raise DecodeError(f"{self._src}: .opw table of {self.header.table_length} bytes exceeds 1 GiB")
                raw = f.read(self.header.table_length)
        except OSError as exc:
            raise DecodeError(f"{self._src}: cannot read ({exc.strerror or exc})") from None
        if len(raw) != self.header.table_length or zlib.crc32(raw) != self.header.table_crc:
            raise DecodeError(f"{self._src}: the .opw table fails its CRC-32; the file is corrupt")
        self.table = opw_table.parse_table(raw, self.header.data_length, self._src, max_elements)
        self._file = MappedFile(self.path, self.size) if mmap and MAPPABLE else None

    # -- program ------------------------------------------------------------------------------
    def _blob(self, index: int) -> tuple[Buffer, int, int]:
        """(buffer, start, length) of blob `index`: the mapping, or (mmap=False) a private copy of the blob."""
        b = self.table.blobs[index]
        start = self.header.data_offset + b.offset
        if self._file is not None:
            buffer: Buffer = self._file.buffer
        else:
            with builtins.open(self.path, "rb") as f:
                f.seek(start)
                buffer, start = bytearray(f.read(b.length)), 0
            if len(buffer) != b.length:
                raise DecodeError(f"{self._src}: blob {index} ends past the end of the file; it was truncated")
        if self.check_crc:
            self._verify_blob(index, buffer, start)
        return buffer, start, b.length

    def _verify_blob(self, index: int, buffer: Buffer, start: int) -> None:
        b = self.table.blobs[index]
        crc = zlib.crc32(memoryview(buffer)[start : start + b.length])
        if crc != b.crc:
            raise DecodeError(
                f"{self._src}: blob {index} fails its CRC-32 (stored {b.crc:08x}, computed {crc:08x}); the file is "
                "corrupt",
                f"blobs[{index}]",
            )

    @cached_property
    def _meta(self) -> m.OpwireArchive:
        buffer, start, length = self._blob(self.table.meta)
        data = bytes(memoryview(buffer)[start : start + length])
        return json.decode(data, m.OpwireArchive, source=f"{self._src}:meta", max_elements=self.max_elements)

    @property
    def program(self) -> m.ExportedProgram:
        """The exported program (decodes only the program blob)."""
        return self._meta.program

    # -- tensors ------------------------------------------------------------------------------
    def names(self, table: Table) -> list[str]:
        """Names of the weights or constants, aliases included, in table order."""
        table = check_table(table)
        return [*self.table.tensors[table], *self.table.aliases[table]]

    def locations(self, table: Table) -> dict[str, int]:
        """Weight or constant name -> its blob (aliases name their target's blob), without reading any."""
        table = check_table(table)
        out = {n: index for n, (index, _) in self.table.tensors[table].items()}
        for n, target in self.table.aliases[table].items():
            t_table, _, t_name = target.partition("/")
            hit = self.table.tensors[t_table].get(t_name)
            out[n] = -1 if hit is None else hit[0]
        return out

    def value(self, table: Table, name: str) -> m.TensorValue:
        """Weight or constant `name` as a TensorValue (its bytes copied once)."""
        from opwire.serde import tensors  # deferred: imports torch (opening and reading the table need none)

        return tensors.from_tensor(self.tensor(table, name, "cpu"), f"{table}[{name!r}]")

    def tensor(self, table: Table, name: str, device: str | torch.device | None = None) -> torch.Tensor:
        """Weight or constant `name` (`table` "weights" or "constants"), viewing the mapped file."""
        return self._tensor(check_table(table), name, device, private=False)

    def _tensor(self, table: str, name: str, device: str | torch.device | None, *, private: bool) -> torch.Tensor:
        """`tensor`; `private=True` maps its bytes separately, so it shares no memory with any other tensor."""
        where = f"{table}[{name!r}]"
        target = self.table.aliases[table].get(name)
        if target is not None:
            table, _, name = target.partition("/")
        hit = self.table.tensors[table].get(name)
        if hit is None:
            raise DecodeError(f"{self._src}: no {table[:-1]} named {name!r}", where)
        index, layout = hit
        buffer, start, length = self._blob(index)
        if private and self._file is not None:
            buffer, start = self._file.region(start, length)
        elif private:
            buffer, start = bytearray(memoryview(buffer)[start : start + length]), 0
        try:
            return view_tensor(buffer, start, length, layout, where, device)
        except DecodeError as exc:
            raise DecodeError(f"{self._src}: {exc} (blob {index})", exc.path) from None

    def tensors(
        self, device: str | torch.device | None = None
    ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """(weights, constants), each tensor mapped; an alias is a view of its target (same storage)."""
        if self._file is not None:
            self._file.check()
        used: set[int] = set()  # blobs already viewed: a second tensor storing the same bytes gets pages of its own
        stored: dict[str, dict[str, torch.Tensor]] = {"weights": {}, "constants": {}}
        for table in stored:
            for n, (index, _) in self.table.tensors[table].items():
                stored[table][n] = self._tensor(table, n, device, private=index in used)
                used.add(index)
        for table, aliases in self.table.aliases.items():
            for n, target in aliases.items():
                t_table, _, t_name = target.partition("/")
                t = stored[t_table][t_name]
                view = t.detach().as_strided(t.shape, t.stride(), t.storage_offset())
                stored[table][n] = view.requires_grad_(t.requires_grad)
        return stored["weights"], stored["constants"]

    def verify(self) -> None:
        """Check the CRC-32 of every blob (the table's was checked at open)."""
        for i in range(len(self.table.blobs)):
            buffer, start, _ = self._blob(i)
            self._verify_blob(i, buffer, start)

    def materialize(self) -> m.OpwireArchive:
        """Everything as an OpwireArchive (each tensor's bytes copied once)."""
        from opwire.serde import tensors  # deferred: imports torch (opening and reading the table need none)

        meta = self._meta
        weights, constants = self.tensors("cpu")
        return m.OpwireArchive(
            program=meta.program,
            weights={k: tensors.from_tensor(v, f"weights[{k!r}]") for k, v in weights.items()},
            constants={k: tensors.from_tensor(v, f"constants[{k!r}]") for k, v in constants.items()},
            example_args=meta.example_args,
            example_kwargs=meta.example_kwargs,
            opwire_version=meta.opwire_version,
        )

    def close(self) -> None:
        """Drop this archive's reference to the mapping (tensors already returned keep it alive)."""
        self._file = None

    def __enter__(self) -> OpwArchive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open(
    path: str | Path, *, verify: bool = False, mmap: bool = True, max_elements: int = budgets.MAX_ELEMENTS
) -> OpwArchive:
    """Open a .opw archive (header and table read and checked now; tensors mapped when asked for)."""
    return OpwArchive(path, verify=verify, mmap=mmap, max_elements=max_elements)


def read(path: str | Path, *, verify: bool = False, max_elements: int = budgets.MAX_ELEMENTS) -> m.OpwireArchive:
    """The whole .opw archive as an OpwireArchive."""
    with open(path, verify=verify, max_elements=max_elements) as archive:
        return archive.materialize()


def write(archive: m.OpwireArchive | ProgramTables, path: str | Path) -> int:
    """Write an OpwireArchive, or an opened archive (`pt2.open`, `opw.open`: no weight copied), as .opw; its size."""
    from opwire.serde._archive import opw_write  # deferred: imports torch

    if isinstance(archive, m.OpwireArchive):
        meta = archive.model_copy(update={"weights": {}, "constants": {}, "opwire_version": __version__})
    elif isinstance(archive, OpwArchive):
        meta = archive._meta.model_copy(update={"opwire_version": __version__})
    elif hasattr(archive, "program") and hasattr(archive, "tensors"):
        meta = m.OpwireArchive(program=archive.program, weights={}, constants={}, opwire_version=__version__)
    else:
        raise EncodeError(f"Expected an OpwireArchive or an opened archive, got {type(archive).__name__}")
    return opw_write.write(archive, path, json.encode(meta))
