"""Where a torch .pt2 archive keeps its program, weights, constants and example inputs, read off its zip directory.

Two layouts are read: torch's current one (`<root>/archive_format` is `pt2`, `<root>/models/<model>.json`,
`<root>/data/weights/…`, `<root>/data/constants/…`, `<root>/data/sample_inputs/<model>.pt`), and the older one
(`serialized_exported_program.json` beside pickled state dicts). `read_layout` tells which an archive holds and
which program in it is meant; `Pt2Layout` names each entry, so `pt2.py` never spells a path.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass

from opwire.errors import DecodeError

__all__ = ["LEGACY_PROGRAM", "Pt2Layout", "read_layout"]

LEGACY_PROGRAM = "serialized_exported_program.json"
"""The program entry of the older layout (which stores the weights pickled)."""

_LEGACY_PICKLES = {"weights": "serialized_state_dict.pt", "constants": "serialized_constants.pt"}


@dataclass(frozen=True)
class Pt2Layout:
    """An archive's layout ("pt2" or "legacy"), the folder its entries sit in, and the program meant."""

    layout: str
    root: str  # "<root>/" for the pt2 layout, "" for the legacy one
    model: str

    @property
    def program(self) -> str:
        """The entry of the program's JSON."""
        return LEGACY_PROGRAM if self.layout == "legacy" else f"{self.root}models/{self.model}.json"

    def config(self, kind: str) -> str:
        """The entry indexing the program's `kind` ("weights" or "constants")."""
        return f"{self.root}data/{kind}/{self.model}_{kind}_config.json"

    def tensor(self, kind: str, path_name: str) -> str:
        """The entry holding one weight's or constant's bytes (its `PayloadMeta.path_name`)."""
        return f"{self.root}data/{kind}/{path_name}"

    def single_file(self, kind: str) -> str:
        """The entry holding every weight or constant as one torch.save pickle (legacy layouts)."""
        if self.layout == "legacy":
            return _LEGACY_PICKLES[kind]
        return f"{self.root}data/{kind}/{self.model}.pt"

    @property
    def example_inputs(self) -> str:
        """The entry of the pickled (args, kwargs) the program was exported with."""
        if self.layout == "legacy":
            return "serialized_example_inputs.pt"
        return f"{self.root}data/sample_inputs/{self.model}.pt"


def read_layout(entries: Collection[str], read: Callable[[str], bytes], src: str, model: str | None) -> Pt2Layout:
    """The layout of the archive whose entry names are `entries`, reading its small marker entries with `read`;
    `model` picks a program when it holds several. A DecodeError names `src` and what is wrong."""
    if LEGACY_PROGRAM in entries:
        return Pt2Layout("legacy", "", model or "model")
    roots = {n.split("/", 1)[0] for n in entries if "/" in n}
    for root in sorted(roots):
        if f"{root}/archive_format" in entries:
            fmt = read(f"{root}/archive_format").strip()
            if fmt != b"pt2":
                raise DecodeError(f"{src}: archive_format is {fmt[:20]!r}, expected b'pt2'")
            _check_version(entries, read, src, root)
            return Pt2Layout("pt2", root + "/", _pick_model(entries, src, root + "/", model))
    raise DecodeError(
        f"{src}: a zip archive but not one torch.export.save wrote (no archive_format and no "
        f"{LEGACY_PROGRAM}); expected a .pt2 export archive"
    )


def _check_version(entries: Collection[str], read: Callable[[str], bytes], src: str, root: str) -> None:
    name = f"{root}/archive_version"
    version = read(name).strip() if name in entries else b"0"
    if version != b"0":
        raise DecodeError(
            f"{src}: archive_version is {version[:20]!r}; this opwire reads pt2 archive version 0 "
            f"(torch 2.8 to 2.13). Re-save it with torch.export.save from a matching torch",
            name,
        )


def _pick_model(entries: Collection[str], src: str, root: str, model: str | None) -> str:
    prefix = f"{root}models/"
    names = sorted(n[len(prefix) : -5] for n in entries if n.startswith(prefix) and n.endswith(".json"))
    if model is None and names:
        model = "model" if "model" in names else names[0] if len(names) == 1 else None
        if model is None:
            raise DecodeError(f"{src}: holds several programs ({', '.join(names)}); name one with model=")
    if model not in names:
        what = f"no program `{model}`" if model else "no exported program (models/*.json)"
        aoti = any(n.startswith(f"{root}data/aotinductor/") for n in entries)
        hint = " - it holds only AOTInductor artifacts" if aoti and not names else ""
        raise DecodeError(f"{src}: {what}{hint}; programs: {', '.join(names) or 'none'}")
    return model
