"""torch .pt2 archives: read lazily into OpwireArchive, write what `torch.export.load` accepts, no pickle.

`open(path)` reads only the zip directory; `.program` parses the program JSON on first use and each
weight or constant is read when asked for, so inspecting a multi-GB archive reads only its JSON.
`read(path)` materializes everything into an `OpwireArchive`. Both the current layout
(`<root>/models/model.json`, `data/weights/…`, `data/constants/…`) and the older one
(`serialized_exported_program.json` with pickled state dict) are read; pickled entries raise a
DecodeError naming the entry unless `allow_pickle=True`.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Any, Unpack

from opwire.errors import DecodeError
from opwire.schema import models as m
from opwire.serde import _pt2_payload as _payload
from opwire.serde import budgets
from opwire.serde._pt2_write import write
from opwire.serde.archive import ZipArchive

__all__ = ["Pt2Archive", "open", "read", "read_program", "write"]

_LEGACY_PROGRAM = "serialized_exported_program.json"
_LEGACY_PICKLES = {"weights": "serialized_state_dict.pt", "constants": "serialized_constants.pt"}


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
    ) -> None:
        self.path = Path(path)
        self.allow_pickle = allow_pickle
        self.max_elements = max_elements
        self._src = str(self.path)
        self._zip = ZipArchive(self.path, max_bytes=max_bytes, max_ratio=max_ratio)
        self._infos = self._zip.infos
        #: entries stored pickled, as (kind, name, entry) - reported, loaded only with allow_pickle
        self.pickled: list[tuple[str, str, str]] = []
        try:
            self.layout, self._root = self._detect_layout()
            self.model = self._pick_model(model)
        except BaseException:
            self._zip.close()
            raise

    # -- layout -----------------------------------------------------------------------------
    def _detect_layout(self) -> tuple[str, str]:
        if _LEGACY_PROGRAM in self._infos:
            return "legacy", ""
        roots = {n.split("/", 1)[0] for n in self._infos if "/" in n}
        for root in sorted(roots):
            if f"{root}/archive_format" in self._infos:
                fmt = self._bytes(f"{root}/archive_format").strip()
                if fmt != b"pt2":
                    raise DecodeError(f"{self._src}: archive_format is {fmt[:20]!r}, expected b'pt2'")
                self._check_version(root)
                return "pt2", root + "/"
        raise DecodeError(
            f"{self._src}: a zip archive but not one torch.export.save wrote (no archive_format and no "
            f"{_LEGACY_PROGRAM}); expected a .pt2 export archive"
        )

    def _check_version(self, root: str) -> None:
        name = f"{root}/archive_version"
        version = self._bytes(name).strip() if name in self._infos else b"0"
        if version != b"0":
            raise DecodeError(
                f"{self._src}: archive_version is {version[:20]!r}; this opwire reads pt2 archive version 0 "
                f"(torch 2.8 to 2.13). Re-save it with torch.export.save from a matching torch",
                name,
            )

    def _pick_model(self, model: str | None) -> str:
        if self.layout == "legacy":
            return model or "model"
        prefix = f"{self._root}models/"
        names = sorted(n[len(prefix) : -5] for n in self._infos if n.startswith(prefix) and n.endswith(".json"))
        if model is None and names:
            model = "model" if "model" in names else names[0] if len(names) == 1 else None
            if model is None:
                raise DecodeError(f"{self._src}: holds several programs ({', '.join(names)}); name one with model=")
        if model not in names:
            what = f"no program `{model}`" if model else "no exported program (models/*.json)"
            aoti = any(n.startswith(f"{self._root}data/aotinductor/") for n in self._infos)
            hint = " - it holds only AOTInductor artifacts" if aoti and not names else ""
            raise DecodeError(f"{self._src}: {what}{hint}; programs: {', '.join(names) or 'none'}")
        return model

    # -- entries ----------------------------------------------------------------------------
    def _bytes(self, name: str) -> bytes:
        try:
            return self._zip.read(name)
        except OSError as exc:
            raise DecodeError(f"{self._src}: cannot read entry `{name}` ({exc.strerror or exc})", name) from None

    def entries(self) -> list[str]:
        """Names of every entry in the zip."""
        return list(self._infos)

    @cached_property
    def program_json(self) -> bytes:
        """The program's JSON bytes, exactly as stored (torch's `models/<model>.json`)."""
        name = _LEGACY_PROGRAM if self.layout == "legacy" else f"{self._root}models/{self.model}.json"
        return self._bytes(name)

    @cached_property
    def program(self) -> m.ExportedProgram:
        """The exported program (parses only its JSON entry)."""
        from opwire.serde import json as _json

        return _json.decode(self.program_json, m.ExportedProgram, source=f"{self._src}", max_elements=self.max_elements)

    def _config(self, kind: str) -> dict[str, m.PayloadMeta]:
        from opwire.serde import json as _json

        name = f"{self._root}data/{kind}/{self.model}_{kind}_config.json"
        if name not in self._infos:
            if self._single_file(kind) in self._infos:
                return {}
            raise DecodeError(f"{self._src}: missing entry `{name}` (the {kind} index)", name)
        return _json.decode(self._bytes(name), m.PayloadConfig, source=f"{self._src}:{name}").config

    @cached_property
    def weight_entries(self) -> dict[str, m.PayloadMeta]:
        """Weight name -> where and how it is stored (empty when all sit in one pickle)."""
        return {} if self.layout == "legacy" else self._config("weights")

    @cached_property
    def constant_entries(self) -> dict[str, m.PayloadMeta]:
        """Constant name -> where and how it is stored (empty for the legacy layout)."""
        return {} if self.layout == "legacy" else self._config("constants")

    def _tensor(self, kind: str, name: str) -> m.TensorValue:
        entries = self.weight_entries if kind == "weights" else self.constant_entries
        meta = entries.get(name)
        if meta is None:
            raise DecodeError(f"{self._src}: no {kind[:-1]} named {name!r}; known: {', '.join(entries)}", name)
        entry = f"{self._root}data/{kind}/{meta.path_name}"
        where = f"{kind}[{name!r}]"
        if meta.use_pickle:
            return self._pickled_tensor(entry, where)
        try:
            return _payload.raw_tensor_value(meta, self._bytes(entry), where)
        except DecodeError as exc:
            if str(exc).startswith(self._src):
                raise
            raise DecodeError(f"{self._src}: {exc} (entry `{entry}`)", exc.path) from None

    def _pickled_tensor(self, entry: str, where: str) -> m.TensorValue:
        if not self.allow_pickle:
            raise _payload.pickle_refused(self._src, entry, where)
        obj = _payload.unpickle(self._bytes(entry), self._src, entry)
        return _to_value(obj, self._src, entry, where)

    def weight(self, name: str) -> m.TensorValue:
        """One weight (parameter or buffer), read now."""
        return self._tensor("weights", name)

    def constant(self, name: str) -> m.TensorValue:
        """One tensor constant, read now."""
        return self._tensor("constants", name)

    # -- whole archive ----------------------------------------------------------------------
    def materialize(self) -> m.OpwireArchive:
        """Everything: the program, every weight and constant, and the example inputs if allowed."""
        from opwire._version import __version__

        program = self.program  # first: a bad program is reported before any weight is read
        weights, constants = self._tensors("weights"), self._tensors("constants")
        args, kwargs = self._example_inputs()
        return m.OpwireArchive(
            program=program,
            weights=weights,
            constants=constants,
            example_args=args,
            example_kwargs=kwargs,
            opwire_version=__version__,
        )

    def _single_file(self, kind: str) -> str:
        """Entry holding all weights/constants as one torch.save pickle (legacy layouts)."""
        if self.layout == "legacy":
            return _LEGACY_PICKLES[kind]
        return f"{self._root}data/{kind}/{self.model}.pt"

    def _tensors(self, kind: str) -> dict[str, m.TensorValue]:
        entry = self._single_file(kind)
        if self.layout == "legacy" or entry in self._infos:
            return self._pickled_table(kind, entry)
        read = self.weight if kind == "weights" else self.constant
        return {n: read(n) for n in (self.weight_entries if kind == "weights" else self.constant_entries)}

    def _pickled_table(self, kind: str, entry: str) -> dict[str, m.TensorValue]:
        from opwire.serde.bindings import bound_tensors

        needed = bound_tensors(self.program)[0 if kind == "weights" else 1]
        if not needed:
            return {}
        if not self.allow_pickle:
            raise _payload.pickle_refused(self._src, entry, f"the {kind} ({', '.join(sorted(needed)[:3])}, ...)")
        table = _payload.unpickle(self._bytes(entry), self._src, entry)
        if not isinstance(table, dict):
            raise DecodeError(f"{self._src}: `{entry}` holds a {type(table).__name__}, expected a dict", entry)
        return {str(k): _to_value(v, self._src, entry, f"{kind}[{k!r}]") for k, v in table.items()}

    def _example_inputs(self) -> tuple[list[m.Value] | None, dict[str, m.Value] | None]:
        if self.layout == "legacy":
            entry = "serialized_example_inputs.pt"
        else:
            entry = f"{self._root}data/sample_inputs/{self.model}.pt"
        if entry not in self._infos or self._infos[entry].file_size == 0:
            return None, None
        if not self.allow_pickle:
            self.pickled.append(("example_inputs", "example_inputs", entry))
            return None, None
        obj = _payload.unpickle(self._bytes(entry), self._src, entry)
        if not (isinstance(obj, tuple) and len(obj) == 2 and isinstance(obj[1], dict)):
            raise DecodeError(f"{self._src}: `{entry}` holds {type(obj).__name__}, expected (args, kwargs)", entry)
        from opwire.errors import EncodeError
        from opwire.serde import objects as _values

        try:
            return _values.inputs_from_python(obj[0], obj[1])
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
    import torch

    from opwire.errors import EncodeError
    from opwire.serde import tensors as _tensors

    if not isinstance(obj, torch.Tensor):
        raise DecodeError(
            f"{archive}: {where} in `{entry}` is a {type(obj).__name__}, not a tensor; an OpwireArchive holds "
            f"tensors only",
            entry,
        )
    try:
        return _tensors.from_tensor(obj, where)
    except EncodeError as exc:
        raise DecodeError(f"{archive}: {exc}", entry) from None


def open(
    path: str | Path, *, model: str | None = None, allow_pickle: bool = False, **limits: Unpack[budgets.ArchiveLimits]
) -> Pt2Archive:
    """Open a .pt2 archive lazily (only the zip directory is read now).

    `limits`: `max_bytes`, `max_ratio`, `max_elements` (defaults in opwire.serde.budgets)."""
    return Pt2Archive(path, model, allow_pickle, **limits)


def read_program(
    path: str | Path, *, model: str | None = None, **limits: Unpack[budgets.ArchiveLimits]
) -> m.ExportedProgram:
    """Only the exported program of a .pt2 archive (reads its JSON entry, no weights)."""
    with open(path, model=model, **limits) as archive:
        return archive.program


def read(
    path: str | Path, *, allow_pickle: bool = False, model: str | None = None, **limits: Unpack[budgets.ArchiveLimits]
) -> m.OpwireArchive:
    """The whole archive as an OpwireArchive: program, weights and constants as TensorValues (limits as `open`)."""
    with open(path, model=model, allow_pickle=allow_pickle, **limits) as archive:
        return archive.materialize()
