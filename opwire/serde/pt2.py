"""torch .pt2 archives: read lazily into OpwireArchive, write what `torch.export.load` accepts, no pickle.

`open(path)` reads only the zip directory; `.program` parses the program JSON on first use and each
weight or constant is read when asked for, so inspecting a multi-GB archive reads only its JSON.
`tensors()` gives every weight and constant as a torch tensor viewing the memory-mapped file (stored
entries; torch writes them uncompressed and 64-byte aligned) - what `run_program(pt2.open(path))` runs
on, with no copy. An entry several tensors name is mapped, or inflated, once. CRCs are checked on
demand (`verify=True`, `verify()`), never by reading every weight up front.
`read(path)` materializes everything into an `OpwireArchive` (each weight's bytes copied once). Both the current layout
(`<root>/models/model.json`, `data/weights/…`, `data/constants/…`) and the older one
(`serialized_exported_program.json` with pickled state dict) are read; pickled entries raise a
DecodeError naming the entry unless `allow_pickle=True`.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

from opwire._version import __version__
from opwire.errors import DecodeError, EncodeError
from opwire.schema import models as m
from opwire.schema.spec_roles import bound_tensors
from opwire.serde import budgets, json
from opwire.serde._archive import pt2_payload
from opwire.serde._archive.mapping import MAPPABLE, Buffer, MappedFile, view_tensor
from opwire.serde._archive.pt2_layout import Pt2Layout, read_layout
from opwire.serde._archive.pt2_write import write
from opwire.serde.archive import ZipArchive
from opwire.serde.tensor_tables import TABLES, Table, check_table

if TYPE_CHECKING:
    import torch

__all__ = ["Pt2Archive", "open", "read", "read_program", "write"]

_ALIGN = 64  # torch's zip writer aligns every entry's data to 64 bytes; others are copied, not mapped


class Pt2Archive:
    """A torch .pt2 archive opened lazily: the program, then each tensor on demand."""

    def __init__(
        self,
        path: str | Path,
        model: str | None = None,
        allow_pickle: bool = False,
        *,
        max_bytes: int = budgets.MAX_ARCHIVE_BYTES,
        max_ratio: int = budgets.MAX_COMPRESSION_RATIO,
        max_elements: int = budgets.MAX_ELEMENTS,
        verify: bool = False,
        mmap: bool = True,
    ) -> None:
        self.path = Path(path)
        self.allow_pickle = allow_pickle
        self.max_elements = max_elements
        self.check_crc = verify  # check each stored entry's CRC-32 when it is read or mapped
        self.use_mmap = mmap and MAPPABLE
        self._mapped: MappedFile | None = None
        self._buffers: dict[str, tuple[Buffer, int, int]] = {}  # entry -> (buffer, start, length)
        self._read_cache: dict[str, bytes] | None = None
        self._src = str(self.path)
        self._zip = ZipArchive(self.path, max_bytes=max_bytes, max_ratio=max_ratio)
        self._infos = self._zip.infos
        self._locations: dict[str, dict[str, m.PayloadMeta]] = {}
        #: entries stored pickled, as (kind, name, entry) - reported, loaded only with allow_pickle
        self.pickled: list[tuple[str, str, str]] = []
        try:
            self._where: Pt2Layout = read_layout(self._infos, self._bytes, self._src, model)
        except BaseException:
            self._zip.close()
            raise
        self.layout = self._where.layout  # "pt2" (torch's current layout) or "legacy"
        self.model = self._where.model  # the program read (the name of its `models/<model>.json`)

    # -- entries ----------------------------------------------------------------------------
    def _bytes(self, name: str) -> bytes:
        try:
            return self._zip.read(name, verify=self.check_crc)
        except OSError as exc:
            raise DecodeError(f"{self._src}: cannot read entry `{name}` ({exc.strerror or exc})", name) from None

    def entries(self) -> list[str]:
        """Names of every entry in the zip."""
        return list(self._infos)

    @cached_property
    def program_json(self) -> bytes:
        """The program's JSON bytes, exactly as stored (torch's `models/<model>.json`)."""
        return self._bytes(self._where.program)

    @cached_property
    def program(self) -> m.ExportedProgram:
        """The exported program (parses only its JSON entry)."""
        return json.decode(self.program_json, m.ExportedProgram, source=f"{self._src}", max_elements=self.max_elements)

    def _config(self, table: str) -> dict[str, m.PayloadMeta]:
        name = self._where.config(table)
        if name not in self._infos:
            if self._where.single_file(table) in self._infos:
                return {}
            raise DecodeError(f"{self._src}: missing entry `{name}` (the {table} index)", name)
        return json.decode(self._bytes(name), m.PayloadConfig, source=f"{self._src}:{name}").config

    def locations(self, table: Table) -> dict[str, m.PayloadMeta]:
        """Weight or constant name -> where and how it is stored (empty when all sit in one pickle); read once."""
        table = check_table(table)
        if table not in self._locations:
            self._locations[table] = {} if self.layout == "legacy" else self._config(table)
        return self._locations[table]

    def names(self, table: Table) -> list[str]:
        """Names of the weights or constants the archive indexes (none when a table sits in one pickle)."""
        return list(self.locations(table))

    def _meta_of(self, table: Table, name: str) -> tuple[m.PayloadMeta, str, str]:
        """(how it is stored, its zip entry, where to report) of weight or constant `name`."""
        entries = self.locations(table)
        meta = entries.get(name)
        if meta is None:
            raise DecodeError(f"{self._src}: no {table[:-1]} named {name!r}; known: {', '.join(entries)}", name)
        return meta, self._where.tensor(table, meta.path_name), f"{table}[{name!r}]"

    def value(self, table: Table, name: str) -> m.TensorValue:
        """Weight or constant `name` as a TensorValue, read now."""
        meta, entry, where = self._meta_of(table, name)
        if meta.use_pickle:
            return self._pickled_tensor(entry, where)
        try:
            storage = self._entry_bytes(entry)
            value = pt2_payload.raw_tensor_value(meta, storage, where)
            if value.data is not storage:  # a part of the entry, copied: charged like a read
                self._charge(len(value.data), entry)
            return value
        except DecodeError as exc:
            if str(exc).startswith(self._src):
                raise
            raise DecodeError(f"{self._src}: {exc} (entry `{entry}`)", exc.path) from None

    def _entry_bytes(self, entry: str) -> bytes:
        """An entry's bytes, read once while `materialize` runs (several tensors may name one entry)."""
        cache = self._read_cache
        if cache is None:
            return self._bytes(entry)
        if entry not in cache:
            cache[entry] = self._bytes(entry)
        return cache[entry]

    def _charge(self, n: int, entry: str) -> None:
        z = self._zip
        if z.read_bytes + n > z.max_bytes:
            raise budgets.exceeded(
                f"{self._src}: the tensors viewing entry `{entry}` bring the bytes held from the archive to",
                z.read_bytes + n,
                "max_bytes",
                z.max_bytes,
                entry,
            )
        z.read_bytes += n

    def _pickled_tensor(self, entry: str, where: str) -> m.TensorValue:
        if not self.allow_pickle:
            raise pt2_payload.pickle_refused(self._src, entry, where)
        obj = pt2_payload.unpickle(self._bytes(entry), self._src, entry)
        return _to_value(obj, self._src, entry, where)

    # -- mapped tensors ---------------------------------------------------------------------
    def tensor(self, table: Table, name: str, device: str | torch.device | None = None) -> torch.Tensor:
        """Weight or constant `name` (`table` "weights" or "constants") as a tensor viewing the mapped file.

        A stored entry is mapped copy-on-write (writes stay private to this process; the file is never
        written), a deflated one inflated within the budgets; each entry once, however many tensors name it
        (those tensors share it, as torch's loader shares a storage). Pickled entries follow `allow_pickle`."""
        from opwire.serde import tensors  # deferred: imports torch (opening an archive and its program need none)

        meta, entry, where = self._meta_of(table, name)
        if meta.use_pickle or not MAPPABLE:
            return tensors.to_tensor(self.value(table, name), device, where)
        buffer, start, length = self._buffer(entry)
        try:
            layout = pt2_payload.payload_layout(meta, where)
            return view_tensor(buffer, start, length, layout, where, device)
        except DecodeError as exc:
            raise DecodeError(f"{self._src}: {exc} (entry `{entry}`)", exc.path) from None

    def tensors(
        self, device: str | torch.device | None = None
    ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """(weights, constants): every tensor the archive stores, mapped (see `tensor`)."""
        from opwire.serde import tensors  # deferred: imports torch (opening an archive and its program need none)

        if self._mapped is not None:
            self._mapped.check()
        out: list[dict[str, torch.Tensor]] = []
        for table in TABLES:
            single = self._where.single_file(table)
            if self.layout == "legacy" or single in self._infos:
                pickled = self._pickled_table(table, single)
                out.append({k: tensors.to_tensor(v, device, f"{table}[{k!r}]") for k, v in pickled.items()})
            else:
                out.append({n: self.tensor(table, n, device) for n in self.locations(table)})
        return out[0], out[1]

    def _buffer(self, entry: str) -> tuple[Buffer, int, int]:
        """(buffer, start, length) of an entry's bytes: the mapped file for a stored entry, else its inflated copy."""
        hit = self._buffers.get(entry)
        if hit is not None:
            return hit
        try:
            stored = self._zip.is_stored(entry)
            if self.use_mmap and stored and self._zip.span(entry)[0] % _ALIGN == 0:
                start, length = self._zip.span(entry)
                if self.check_crc:
                    self._zip.verify(entry)
                if self._mapped is None:
                    self._mapped = MappedFile(self.path, self._zip.size)
                hit = (self._mapped.buffer, start, length)
            else:
                # deflated, or stored unaligned by a foreign writer (torch aligns to 64): a private, aligned copy
                data = self._zip.inflate(entry) if not stored else bytearray(self._bytes(entry))
                hit = (data, 0, len(data))
        except OSError as exc:
            raise DecodeError(f"{self._src}: cannot read entry `{entry}` ({exc.strerror or exc})", entry) from None
        self._buffers[entry] = hit
        return hit

    def verify(self) -> None:
        """Check the CRC-32 of every entry this program reads (streamed in chunks; nothing is kept)."""
        for name in self._infos:
            try:
                self._zip.verify(name)
            except OSError as exc:
                raise DecodeError(f"{self._src}: cannot read entry `{name}` ({exc.strerror or exc})", name) from None

    # -- whole archive ----------------------------------------------------------------------
    def materialize(self) -> m.OpwireArchive:
        """Everything: the program, every weight and constant, and the example inputs if allowed."""
        program = self.program  # first: a bad program is reported before any weight is read
        self._read_cache = {}
        try:
            weights, constants = self._tensors("weights"), self._tensors("constants")
        finally:
            self._read_cache = None
        args, kwargs = self._example_inputs()
        return m.OpwireArchive(
            program=program,
            weights=weights,
            constants=constants,
            example_args=args,
            example_kwargs=kwargs,
            opwire_version=__version__,
        )

    def _tensors(self, table: Table) -> dict[str, m.TensorValue]:
        entry = self._where.single_file(table)
        if self.layout == "legacy" or entry in self._infos:
            return self._pickled_table(table, entry)
        return {n: self.value(table, n) for n in self.locations(table)}

    def _pickled_table(self, table: str, entry: str) -> dict[str, m.TensorValue]:
        needed = bound_tensors(self.program)[0 if table == "weights" else 1]
        if not needed:
            return {}
        if not self.allow_pickle:
            raise pt2_payload.pickle_refused(self._src, entry, f"the {table} ({', '.join(sorted(needed)[:3])}, ...)")
        pickled = pt2_payload.unpickle(self._bytes(entry), self._src, entry)
        if not isinstance(pickled, dict):
            raise DecodeError(f"{self._src}: `{entry}` holds a {type(pickled).__name__}, expected a dict", entry)
        return {str(k): _to_value(v, self._src, entry, f"{table}[{k!r}]") for k, v in pickled.items()}

    def _example_inputs(self) -> tuple[list[m.Value] | None, dict[str, m.Value] | None]:
        entry = self._where.example_inputs
        if entry not in self._infos or self._infos[entry].file_size == 0:
            return None, None
        if not self.allow_pickle:
            self.pickled.append(("example_inputs", "example_inputs", entry))
            return None, None
        obj = pt2_payload.unpickle(self._bytes(entry), self._src, entry)
        if not (isinstance(obj, tuple) and len(obj) == 2 and isinstance(obj[1], dict)):
            raise DecodeError(f"{self._src}: `{entry}` holds {type(obj).__name__}, expected (args, kwargs)", entry)
        from opwire.serde import objects  # deferred: imports torch (only pickled example inputs need it)

        try:
            return objects.inputs_from_python(obj[0], obj[1])
        except EncodeError as exc:
            raise DecodeError(f"{self._src}: example inputs in `{entry}`: {exc}", entry) from None

    def close(self) -> None:
        """Close the underlying zip file."""
        self._zip.close()

    def __enter__(self) -> Pt2Archive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _to_value(obj: Any, archive: str, entry: str, where: str) -> m.TensorValue:
    import torch  # deferred: only a pickled table (allow_pickle) holds torch objects

    from opwire.serde import tensors  # deferred: imports torch

    if not isinstance(obj, torch.Tensor):
        raise DecodeError(
            f"{archive}: {where} in `{entry}` is a {type(obj).__name__}, not a tensor; an OpwireArchive holds "
            f"tensors only",
            entry,
        )
    try:
        return tensors.from_tensor(obj, where)
    except EncodeError as exc:
        raise DecodeError(f"{archive}: {exc}", entry) from None


def open(
    path: str | Path,
    *,
    model: str | None = None,
    allow_pickle: bool = False,
    verify: bool = False,
    mmap: bool = True,
    **limits: Unpack[budgets.ArchiveLimits],
) -> Pt2Archive:
    """Open a .pt2 archive lazily (only the zip directory is read now; tensors are mapped when asked for).

    `verify=True` checks each entry's CRC-32 as it is read or mapped; `mmap=False` reads tensors into
    private memory instead of mapping the file. `limits`: `max_bytes`, `max_ratio`, `max_elements`
    (defaults in opwire.serde.budgets)."""
    return Pt2Archive(path, model, allow_pickle, verify=verify, mmap=mmap, **limits)


def read_program(
    path: str | Path, *, model: str | None = None, **limits: Unpack[budgets.ArchiveLimits]
) -> m.ExportedProgram:
    """Only the exported program of a .pt2 archive (reads its JSON entry, no weights)."""
    with open(path, model=model, **limits) as archive:
        return archive.program


def read(
    path: str | Path,
    *,
    allow_pickle: bool = False,
    model: str | None = None,
    verify: bool = False,
    **limits: Unpack[budgets.ArchiveLimits],
) -> m.OpwireArchive:
    """The whole archive as an OpwireArchive: program, weights and constants as TensorValues (as `open`).

    Each entry is read once; a stored entry's CRC-32 is checked only with `verify=True` (deflated ones always)."""
    with open(path, model=model, allow_pickle=allow_pickle, verify=verify, **limits) as archive:
        return archive.materialize()
