"""`opwire.open`: the one way a path, bytes, a model or a torch program becomes a typed, opened object.

A file is judged by its first bytes before the rest is read (`/dev/zero` is refused at once): each entry of
`CONTAINERS` says whether the head is its container (a zip, Thrift with opwire's header, JSON) and opens it
within the budgets. What it holds (its root type) then gives the kind (`kinds.ROOT_KINDS`), and `expect=`
refuses another kind before anything else is decoded. Adding a container format is one entry here.
"""

from __future__ import annotations

import json as _stdlib_json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from opwire.errors import DecodeError
from opwire.program.kinds import KINDS, ROOT_KINDS, FindingsFile, Kind, StreamedTrace
from opwire.program.opened import OpenedProgram, opened_of
from opwire.schema import models as m
from opwire.serde import budgets, framing
from opwire.serde import json as json_codec
from opwire.serde.files import read_head, read_input

__all__ = ["CONTAINERS", "Budgets", "Container", "open"]


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
    open: Callable[[Path, Budgets, Kind | None], Any]


def _want(kind: Kind, expect: Kind | None, where: str) -> None:
    """DecodeError unless a file of `kind` is what the caller expects (an archive is also a program)."""
    if expect is None or expect == kind or (expect == "program" and kind == "archive"):
        return
    raise DecodeError(f"{where}: expected {KINDS[expect]}, got {KINDS[kind]}; `opwire inspect` tells what a file holds")


# ------------------------------------------------------------------------------------ containers
def _open_zip(path: Path, b: Budgets, expect: Kind | None) -> Any:
    """A .pt2 export archive (opened lazily), or the extern nodes of an AOTInductor package."""
    from opwire.serde.archive import ZipArchive
    from opwire.serde.detect import aoti_wrapper

    max_bytes = budgets.MAX_ARCHIVE_BYTES if b.max_bytes is None else b.max_bytes
    with ZipArchive(path, max_bytes=max_bytes, max_ratio=b.max_ratio) as z:
        names = z.names()
        has_program = any("/models/" in n and n.endswith(".json") for n in names) or any(
            n.endswith("serialized_exported_program.json") for n in names
        )
        wrapper = aoti_wrapper(z) if expect == "extern_nodes" or not has_program else None
        if wrapper is not None:
            return json_codec.decode(
                z.read(wrapper), m.ExternKernelNodes, source=f"{path}:{wrapper}", max_elements=b.max_elements
            )
        if expect == "extern_nodes":
            raise DecodeError(
                f"{path}: expected exactly one data/aotinductor/**/*.wrapper.json in the package, found 0; "
                "was the model compiled with extern (fallback) kernels?"
            )
    _want("archive", expect, str(path))
    from opwire.serde import pt2

    archive = pt2.open(
        path, model=b.model, allow_pickle=b.allow_pickle, max_bytes=max_bytes, max_ratio=b.max_ratio,
        max_elements=b.max_elements,
    )  # fmt: skip
    return OpenedProgram("archive", str(path), pt2=archive, owns_pt2=True)


def _open_framed(path: Path, b: Budgets, expect: Kind | None) -> Any:
    """Thrift with opwire's header: a streamed trace stays a handle; anything else is read within the budget."""
    sniffed = framing.sniff(read_head(path, 256))
    if sniffed is not None and sniffed[1] == "TraceFrame":
        _want("trace", expect, str(path))
        return StreamedTrace(path)
    return _from_bytes(_read(path, b), str(path), b, expect)


def _open_json(path: Path, b: Budgets, expect: Kind | None) -> Any:
    return _from_bytes(_read(path, b), str(path), b, expect)


def _is_zip_head(head: bytes) -> bool:
    return head.startswith((b"PK\x03\x04", b"PK\x05\x06"))


CONTAINERS: list[Container] = [
    Container("zip (.pt2 export archive or AOTInductor package)", _is_zip_head, _open_zip),
    Container("Thrift with opwire's header", framing.has_header, _open_framed),
    Container("JSON", json_codec.looks_like_json, _open_json),
]
"""File formats in the order they are tried on a file's first bytes."""


def _read(path: Path, b: Budgets) -> bytes:
    return read_input(path, max_bytes=budgets.MAX_INPUT_BYTES if b.max_bytes is None else b.max_bytes, what="file")


# ----------------------------------------------------------------------------------------- bytes
def _from_bytes(data: bytes, where: str, b: Budgets, expect: Kind | None) -> Any:
    """Decode the bytes of one file (framed Thrift or JSON) as the kind its root type names."""
    sniffed = framing.sniff(data)
    if framing.has_header(data):
        root = framing.read_header(data, where).root if sniffed is None else sniffed[1]
        return _decode_root(root, data, where, b, expect)
    if not json_codec.looks_like_json(data):
        raise DecodeError(
            f"{where}: neither a .pt2 zip archive, JSON, nor a file opwire wrote in Thrift form (it starts with "
            f"{bytes(data[:8])!r}); raw Thrift needs its codec and type: opwire.loads(data, cls, format=...)"
        )
    json_codec.check_elements(data, b.max_elements, where)  # before anything parses it
    top = _json_top(data, where)
    if "opwire_findings" in top or ("reports" in top and json_codec.json_root(top) is None):
        _want("findings", expect, where)
        return FindingsFile(where, top)
    root = json_codec.json_root(top)
    if root is None:
        raise DecodeError(
            f"{where}: a JSON object with keys {sorted(top)[:6]} is none of the kinds opwire reads "
            f"({', '.join(KINDS)}); `opwire inspect` tells what a file holds"
        )
    return _decode_root(root, data, where, b, expect)


def _json_top(data: bytes, where: str) -> dict[str, Any]:
    try:
        top = _stdlib_json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise DecodeError(f"{where}: not valid JSON ({exc})") from None
    except RecursionError:
        raise DecodeError(
            f"{where}: JSON nesting deeper than Python's parser reads; opwire's JSON nesting stops at "
            f"{json_codec.JSON_PARSER_DEPTH}"
        ) from None
    if not isinstance(top, dict):
        raise DecodeError(f"{where}: expected a JSON object at the top level, got {type(top).__name__}")
    return top


def _decode_root(root: str, data: bytes, where: str, b: Budgets, expect: Kind | None) -> Any:
    kind = ROOT_KINDS.get(root)
    cls = m.MODELS.get(root)
    if kind is None or cls is None or root == "TraceFrame":
        what = "a streamed trace (open it from its file)" if root == "TraceFrame" else f"root type {root!r}"
        raise DecodeError(f"{where}: holds {what}, which opwire.open does not read from bytes")
    _want(kind, expect, where)
    if kind in ("program", "archive"):

        def decode() -> Any:
            return _decode_model(data, cls, where, b)

        return OpenedProgram(kind, where, decode=decode)  # type: ignore[arg-type]
    return _decode_model(data, cls, where, b)


def _decode_model(data: bytes, cls: type[BaseModel], where: str, b: Budgets) -> Any:
    if framing.has_header(data):
        from opwire.serde import thrift

        codec: Any = framing.read_header(data, where).codec
        return thrift.decode(data, cls, codec, framed=True, source=where, max_elements=b.max_elements)
    return json_codec.decode(data, cls, source=where, max_elements=b.max_elements)


# ---------------------------------------------------------------------------------------- open()
def open(  # noqa: A001 - `opwire.open` is the name users call
    source: Any,
    *,
    expect: Kind | None = None,
    max_bytes: int | None = None,
    max_elements: int | None = None,
    max_ratio: int | None = None,
    allow_pickle: bool = False,
    model: str | None = None,
) -> Any:
    """Open a path, bytes, a model or a torch ExportedProgram as a typed object, judged by what it holds.

    Programs and archives (a .pt2, opwire's archive, a program's JSON or Thrift) come back as an
    `OpenedProgram`: decoded on first use, tensors read when first used, checked once. Extern-node files
    (or the AOTInductor .pt2 holding one) come back as `m.ExternKernelNodes`, whole traces as `m.CallTrace`,
    streamed traces as a `StreamedTrace` handle (`opwire.load_trace` reads either as a Trace), snapshots as
    `m.OpLibrarySnapshot`, Values files (inputs, .nodes) as `m.Values`, findings as a `FindingsFile`.
    `expect` names the kind wanted (`opwire.program.KINDS`; "program" also takes an archive); another kind
    is a DecodeError saying what came. `max_bytes` bounds a non-zip file (default 4 GiB) or an archive's
    inflated entries (64 GiB); `max_elements` the containers one decode builds; `max_ratio` a zip entry's
    compression ratio; `allow_pickle` reads pickled tables of legacy .pt2 files; `model` picks one program
    of a .pt2 holding several.
    """
    if expect is not None and expect not in KINDS:
        raise ValueError(f"unknown kind {expect!r}: expected one of {', '.join(KINDS)}")
    b = Budgets(
        max_bytes,
        budgets.MAX_ELEMENTS if max_elements is None else max_elements,
        budgets.MAX_COMPRESSION_RATIO if max_ratio is None else max_ratio,
        allow_pickle,
        model,
    )
    if isinstance(source, str | Path):
        return _open_path(Path(source), b, expect)
    if isinstance(source, bytes | bytearray | memoryview):
        data = bytes(source)
        if max_bytes is not None and len(data) > max_bytes:
            raise budgets.exceeded("the input has bytes", len(data), "max_bytes", max_bytes)
        if _is_zip_head(data):
            raise DecodeError("bytes of a zip archive: write them to a .pt2 file and open the path")
        return _from_bytes(data, "input", b, expect)
    return _open_object(source, expect)


def _open_path(path: Path, b: Budgets, expect: Kind | None) -> Any:
    try:
        head = read_head(path)
    except OSError as exc:
        raise DecodeError(f"cannot read {path}: {exc.strerror or exc}") from None
    for container in CONTAINERS:
        if container.sniff(head):
            try:
                return container.open(path, b, expect)
            except OSError as exc:
                raise DecodeError(f"cannot read {path}: {exc.strerror or exc}") from None
    raise DecodeError(
        f"{path}: neither a .pt2 zip archive, JSON, nor a file opwire wrote in Thrift form (it starts with "
        f"{head[:8]!r}); expected {KINDS[expect] if expect else 'one of: ' + ', '.join(KINDS)}"
    )


def _open_object(obj: Any, expect: Kind | None) -> Any:
    """Models and programs already in memory: wrapped, never copied."""
    from opwire.serde.pt2 import Pt2Archive

    if isinstance(obj, OpenedProgram):
        _want(obj.kind, expect, obj.source)
        return obj
    if isinstance(obj, m.ExportedProgram | m.OpwireArchive):
        opened = opened_of(obj)
        _want(opened.kind, expect, opened.source)
        return opened
    if isinstance(obj, Pt2Archive):
        _want("archive", expect, str(obj.path))
        return OpenedProgram("archive", str(obj.path), pt2=obj)
    if type(obj).__name__ == "ExportedProgram" and type(obj).__module__.startswith("torch."):
        _want("archive", expect, "the torch ExportedProgram")

        def convert() -> m.OpwireArchive:
            from opwire.serde.torch_bridge import archive_from_exported_program

            return archive_from_exported_program(obj)

        return OpenedProgram("archive", "the torch ExportedProgram", decode=convert)
    if isinstance(obj, StreamedTrace | FindingsFile):
        _want(obj.kind, expect, str(getattr(obj, "path", getattr(obj, "source", ""))))
        return obj
    if isinstance(obj, BaseModel) and type(obj).__name__ in ROOT_KINDS:
        _want(ROOT_KINDS[type(obj).__name__], expect, f"the {type(obj).__name__} model")
        return obj
    raise DecodeError(
        f"Expected a path, bytes, an opwire model ({', '.join(sorted(ROOT_KINDS))}), an opened program, a "
        f"lazy .pt2 archive (opwire.serde.pt2.open) or a torch ExportedProgram, got {type(obj).__name__}"
    )
