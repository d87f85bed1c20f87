"""The containers opwire recognises by a file's first bytes (a zip, Thrift with opwire's header, JSON), and
how the bytes of one become the kind its root type names. Adding a container format is one `CONTAINERS` entry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from opwire.errors import DecodeError
from opwire.program.files import read_head, read_input
from opwire.program.kinds import KINDS, ROOT_KINDS, FindingsFile, Kind, StreamedTrace
from opwire.program.opened import OpenedProgram
from opwire.schema import models as m
from opwire.serde import budgets, framing, json, opw, pt2, thrift, thrift_archive
from opwire.serde.archive import ZipArchive, is_zip_head

__all__ = ["CONTAINERS", "Budgets", "Container", "Opened", "aoti_wrapper", "from_bytes", "want"]

Opened = (
    OpenedProgram
    | m.ExternKernelNodes
    | m.CallTrace
    | StreamedTrace
    | m.OpLibrarySnapshot
    | m.Values
    | FindingsFile
    | BaseModel
)
"""What `opwire.open` returns: an opened program, or a file of another kind as its own type (any other root
model of the schema, a framed `Node` say, as that model)."""


@dataclass(frozen=True)
class Budgets:
    """What one open may cost (defaults in `opwire.serde.budgets`); `allow_pickle` only for .pt2 legacy tables."""

    max_bytes: int | None = None
    max_elements: int = budgets.MAX_ELEMENTS
    max_ratio: int = budgets.MAX_COMPRESSION_RATIO
    allow_pickle: bool = False
    model: str | None = None


@dataclass(frozen=True)
class Container:
    """A file format opwire recognises by its first bytes, and how to open a file of it."""

    name: str
    sniff: Callable[[bytes], bool]
    open: Callable[[Path, Budgets, Kind | None], Opened]


def want(kind: Kind, expect: Kind | None, where: str) -> None:
    """DecodeError unless a file of `kind` is what the caller expects (an archive is also a program)."""
    if expect is None or expect == kind or (expect == "program" and kind == "archive"):
        return
    raise DecodeError(f"{where}: expected {KINDS[expect]}, got {KINDS[kind]}; `opwire inspect` tells what a file holds")


# ------------------------------------------------------------------------------------ containers
def _open_zip(path: Path, b: Budgets, expect: Kind | None) -> Opened:
    """A .pt2 export archive (opened lazily), or the extern nodes of an AOTInductor package."""

    max_bytes = budgets.MAX_ARCHIVE_BYTES if b.max_bytes is None else b.max_bytes
    with ZipArchive(path, max_bytes=max_bytes, max_ratio=b.max_ratio) as z:
        names = z.names()
        has_program = any("/models/" in n and n.endswith(".json") for n in names) or any(
            n.endswith("serialized_exported_program.json") for n in names
        )
        wrapper = aoti_wrapper(z) if expect == "extern_nodes" or not has_program else None
        if wrapper is not None:
            return json.decode(
                z.read(wrapper), m.ExternKernelNodes, source=f"{path}:{wrapper}", max_elements=b.max_elements
            )
        if expect == "extern_nodes":
            raise DecodeError(
                f"{path}: expected exactly one data/aotinductor/**/*.wrapper.json in the package, found 0; "
                "was the model compiled with extern (fallback) kernels?"
            )
    want("archive", expect, str(path))

    archive = pt2.open(
        path, model=b.model, allow_pickle=b.allow_pickle, max_bytes=max_bytes, max_ratio=b.max_ratio,
        max_elements=b.max_elements,
    )  # fmt: skip
    return OpenedProgram("archive", str(path), pt2=archive, owns_pt2=True)


def _open_framed(path: Path, b: Budgets, expect: Kind | None) -> Opened:
    """Thrift with opwire's header: a streamed trace stays a handle; anything else is read within the budget."""
    sniffed = framing.sniff(read_head(path, 256))
    if sniffed is not None and sniffed[1] == "TraceFrame":
        want("trace", expect, str(path))
        return StreamedTrace(path)
    if sniffed is not None and sniffed[1] == "OpwireArchive" and path.is_file():  # payloads mapped, not read
        want("archive", expect, str(path))

        limit = budgets.MAX_ARCHIVE_BYTES if b.max_bytes is None else b.max_bytes
        if path.stat().st_size > limit:
            raise budgets.exceeded(f"{path}: the archive has bytes", path.stat().st_size, "max_bytes", limit)
        archive = thrift_archive.open(path, max_elements=b.max_elements)
        return OpenedProgram("archive", str(path), pt2=archive, owns_pt2=True)
    return from_bytes(_read(path, b), str(path), b, expect)


def _open_json(path: Path, b: Budgets, expect: Kind | None) -> Opened:
    return from_bytes(_read(path, b), str(path), b, expect)


def aoti_wrapper(archive: ZipArchive) -> str | None:
    """The one extern-node entry (`data/aotinductor/**/*.wrapper.json`) of an AOTInductor package, None if none.

    A package with several is a DecodeError naming them."""
    names = [n for n in archive.names() if "/data/aotinductor/" in n and n.endswith(".wrapper.json")]
    if len(names) > 1:
        raise DecodeError(
            f"{archive.src}: AOTInductor package with {len(names)} extern-node files ({', '.join(names)}); expected one"
        )
    return names[0] if names else None


def _is_opw_head(head: bytes) -> bool:
    return head.startswith(framing.OPW_MAGIC)


def _open_opw(path: Path, b: Budgets, expect: Kind | None) -> Opened:
    """opwire's own archive: header and table checked now, the program on first use, tensors mapped."""
    want("archive", expect, str(path))

    return OpenedProgram("archive", str(path), pt2=opw.open(path, max_elements=b.max_elements), owns_pt2=True)


CONTAINERS: list[Container] = [
    Container("zip (.pt2 export archive or AOTInductor package)", is_zip_head, _open_zip),
    Container(".opw archive", _is_opw_head, _open_opw),
    Container("Thrift with opwire's header", framing.has_header, _open_framed),
    Container("JSON", json.looks_like_json, _open_json),
]
"""File formats in the order they are tried on a file's first bytes."""


def _read(path: Path, b: Budgets) -> bytes:
    return read_input(path, max_bytes=budgets.MAX_INPUT_BYTES if b.max_bytes is None else b.max_bytes, what="file")


# ----------------------------------------------------------------------------------------- bytes
def from_bytes(data: bytes, where: str, b: Budgets, expect: Kind | None) -> Opened:
    """Decode the bytes of one file (framed Thrift or JSON) as the kind its root type names."""
    sniffed = framing.sniff(data)
    if framing.has_header(data):
        root = framing.read_header(data, where).root if sniffed is None else sniffed[1]
        return _decode_root(root, data, where, b, expect)
    if not json.looks_like_json(data):  # a JSON array is refused below, by what its top holds
        raise DecodeError(
            f"{where}: neither a .pt2 zip archive, JSON, nor a file opwire wrote in Thrift form (it starts with "
            f"{bytes(data[:8])!r}); raw Thrift needs its codec and type: opwire.loads(data, cls, format=...)"
        )
    json.check_elements(data, b.max_elements, where)  # before anything parses it
    top = json.json_top(data, where, object_only=expect != "findings")
    if expect == "findings" or "opwire_findings" in top or ("reports" in top and json.json_root(top) is None):
        want("findings", expect, where)  # a findings document is checked entry by entry where it is drawn
        return FindingsFile(where, top)
    found = json.json_root(top)
    if found is None:
        raise DecodeError(
            f"{where}: a JSON object with keys {sorted(top)[:6]} is none of the types opwire reads ({', '.join(KINDS)})"
        )
    return _decode_root(found, data, where, b, expect)


def _decode_root(root: str, data: bytes, where: str, b: Budgets, expect: Kind | None) -> Opened:
    kind = ROOT_KINDS.get(root)
    cls = m.MODELS.get(root)
    if cls is None or root == "TraceFrame":
        what = "a streamed trace (open it from its file)" if root == "TraceFrame" else f"root type {root!r}"
        raise DecodeError(f"{where}: holds {what}, which opwire.open does not read from bytes")
    if kind is None:  # a model of the schema that is no file kind (a framed `Node`): only when nothing is expected
        if expect is not None:
            raise DecodeError(f"{where}: expected {KINDS[expect]}, got a {root} model")
        return _decode_model(data, cls, where, b)  # type: ignore[no-any-return]
    want(kind, expect, where)
    if kind == "program" or kind == "archive":

        def decode() -> Any:
            return _decode_model(data, cls, where, b)

        return OpenedProgram(kind, where, decode=decode)
    decoded: Opened = _decode_model(data, cls, where, b)
    return decoded


def _decode_model(data: bytes, cls: type[BaseModel], where: str, b: Budgets) -> Any:
    if framing.has_header(data):
        codec: Any = framing.read_header(data, where).codec
        return thrift.decode(data, cls, codec, framed=True, source=where, max_elements=b.max_elements)
    return json.decode(data, cls, source=where, max_elements=b.max_elements)


# ---------------------------------------------------------------------------------------- open()
