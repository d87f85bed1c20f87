"""`opwire.open`: the one way a path, bytes, a model or a torch program becomes a typed, opened object.

A file is judged by its first bytes before the rest is read (`/dev/zero` is refused at once): each entry of
`containers.CONTAINERS` says whether the head is its container (a zip, Thrift with opwire's header, JSON) and
opens it within the budgets. What it holds (its root type) then gives the kind (`kinds.ROOT_KINDS`), and
`expect=` refuses another kind before anything else is decoded.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypeAlias, cast, overload

from opwire.errors import DecodeError
from opwire.program.containers import CONTAINERS, Budgets, Opened, from_bytes, want
from opwire.program.files import read_head
from opwire.program.kinds import KINDS, ROOT_KINDS, FindingsFile, Kind, StreamedTrace
from opwire.program.opened import LazyArchive, OpenedProgram, opened_of
from opwire.schema import models as m
from opwire.serde import budgets
from opwire.serde.archive import is_zip_head
from opwire.serde.opw import OpwArchive
from opwire.serde.pt2 import Pt2Archive
from opwire.serde.thrift_archive import ThriftArchive

if TYPE_CHECKING:
    import torch

__all__ = ["Source", "open"]

Source: TypeAlias = "str | Path | bytes | bytearray | memoryview | Opened | LazyArchive | torch.export.ExportedProgram"
"""What `open` takes: a path, bytes, an opened object or model (returned as it is, or wrapped), a lazily opened
archive (`opwire.serde.pt2.open` and its kin), or a torch ExportedProgram."""


@overload
def open(
    source: Source,
    *,
    expect: Literal["program", "archive"],
    max_bytes: int | None = None,
    max_elements: int | None = None,
    max_ratio: int | None = None,
    allow_pickle: bool = False,
    model: str | None = None,
) -> OpenedProgram: ...


@overload
def open(
    source: Source,
    *,
    expect: Literal["extern_nodes"],
    max_bytes: int | None = None,
    max_elements: int | None = None,
    max_ratio: int | None = None,
    allow_pickle: bool = False,
    model: str | None = None,
) -> m.ExternKernelNodes: ...


@overload
def open(
    source: Source,
    *,
    expect: Literal["trace"],
    max_bytes: int | None = None,
    max_elements: int | None = None,
    max_ratio: int | None = None,
    allow_pickle: bool = False,
    model: str | None = None,
) -> m.CallTrace | StreamedTrace: ...


@overload
def open(
    source: Source,
    *,
    expect: Literal["snapshot"],
    max_bytes: int | None = None,
    max_elements: int | None = None,
    max_ratio: int | None = None,
    allow_pickle: bool = False,
    model: str | None = None,
) -> m.OpLibrarySnapshot: ...


@overload
def open(
    source: Source,
    *,
    expect: Literal["values"],
    max_bytes: int | None = None,
    max_elements: int | None = None,
    max_ratio: int | None = None,
    allow_pickle: bool = False,
    model: str | None = None,
) -> m.Values: ...


@overload
def open(
    source: Source,
    *,
    expect: Literal["findings"],
    max_bytes: int | None = None,
    max_elements: int | None = None,
    max_ratio: int | None = None,
    allow_pickle: bool = False,
    model: str | None = None,
) -> FindingsFile: ...


@overload
def open(
    source: Source,
    *,
    expect: None = None,
    max_bytes: int | None = None,
    max_elements: int | None = None,
    max_ratio: int | None = None,
    allow_pickle: bool = False,
    model: str | None = None,
) -> Opened: ...


def open(
    source: Source,
    *,
    expect: Kind | None = None,
    max_bytes: int | None = None,
    max_elements: int | None = None,
    max_ratio: int | None = None,
    allow_pickle: bool = False,
    model: str | None = None,
) -> Opened:
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
        if is_zip_head(data):
            raise DecodeError("bytes of a zip archive: write them to a .pt2 file and open the path")
        return from_bytes(data, "input", b, expect)
    return _open_object(source, expect)


def _open_path(path: Path, b: Budgets, expect: Kind | None) -> Opened:
    # an OSError (a missing file) is the caller's to report, as open() does; an empty file is called empty
    head = read_head(path, what="trace" if expect == "trace" else "file")
    for container in CONTAINERS:
        if container.sniff(head):
            return container.open(path, b, expect)
    raise DecodeError(
        f"{path}: neither a .pt2 zip archive, JSON, nor a file opwire wrote in Thrift form (no opwire header; it "
        f"starts with {head[:8]!r}); expected {KINDS[expect] if expect else 'one of: ' + ', '.join(KINDS)}; "
        "raw Thrift needs its codec and type: opwire.loads(data, cls, format=...)"
    )


def _open_object(obj: Source, expect: Kind | None) -> Opened:
    """Models and programs already in memory: wrapped, never copied."""

    if isinstance(obj, OpenedProgram):
        want(obj.kind, expect, obj.source)
        return obj
    if isinstance(obj, m.ExportedProgram | m.OpwireArchive):
        opened = opened_of(obj)
        want(opened.kind, expect, opened.source)
        return opened
    if isinstance(obj, Pt2Archive | OpwArchive | ThriftArchive):
        want("archive", expect, str(obj.path))
        return OpenedProgram("archive", str(obj.path), pt2=obj)
    if type(obj).__name__ == "ExportedProgram" and type(obj).__module__.startswith("torch."):
        want("archive", expect, "the torch ExportedProgram")
        ep = cast("torch.export.ExportedProgram", obj)  # told by its type's name: torch stays unimported

        def convert() -> m.OpwireArchive:
            from opwire.serde.torch_bridge import archive_from_exported_program  # deferred: imports torch

            return archive_from_exported_program(ep)

        return OpenedProgram("archive", "the torch ExportedProgram", decode=convert)
    if isinstance(obj, StreamedTrace | FindingsFile):
        want(obj.kind, expect, str(getattr(obj, "path", getattr(obj, "source", ""))))
        return obj
    if isinstance(obj, m.ExternKernelNodes | m.CallTrace | m.OpLibrarySnapshot | m.Values):
        want(ROOT_KINDS[type(obj).__name__], expect, f"the {type(obj).__name__} model")
        return obj
    raise DecodeError(
        f"Expected a path, bytes, an opwire model ({', '.join(sorted(ROOT_KINDS))}), an opened program, a "
        f"lazy .pt2 archive (opwire.serde.pt2.open) or a torch ExportedProgram, got {type(obj).__name__}"
    )
