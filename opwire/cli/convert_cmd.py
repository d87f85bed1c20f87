"""`opwire convert IN OUT --to json|binary|compact|pt2|opw`: programs and archives between formats.

The input is recognized from its content: a zip (a torch .pt2 archive, read without unpickling),
a .opw archive (its magic), JSON (a program, or an OpwireArchive), or a file opwire wrote in Thrift
form (its header says what it holds). `json` writes the program alone, byte-identical to torch's
`models/model.json`; `binary`/`compact` write the whole OpwireArchive when the input is an archive
(else the program); `pt2` writes a torch archive that `torch.export.load` accepts; `opw` writes
opwire's mappable archive (from a .pt2 or .opw the weights are mapped, never copied into memory).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Literal, cast

import opwire
from opwire import __version__, program, serde
from opwire.cli.options import LOADING_HELP, add_budget_flags, add_loading
from opwire.errors import DecodeError
from opwire.program import OpenedProgram, check_output, write_output
from opwire.schema import first_missing
from opwire.schema import models as m
from opwire.serde import MAX_ELEMENTS, check_spec, program_specs

__all__ = ["TARGETS", "add_parser", "convert", "run"]

TARGETS = ("json", "binary", "compact", "pt2", "opw")
_BY_SUFFIX = {".json": "json", ".pt2": "pt2", ".opw": "opw", ".bin": "binary", ".compact": "compact"}
"""Output suffix -> target (`--to` overrides it)."""
_Root = m.ExportedProgram | m.OpwireArchive
_Codec = Literal["json", "binary", "compact"]


def add_parser(sub: Any) -> None:
    """Register `convert`."""
    p = sub.add_parser(
        "convert",
        help="convert programs and archives between JSON, Thrift binary/compact, .pt2 and .opw",
        description="Convert a program or archive. IN is a .pt2 archive (torch.export.save), torch's program "
        "JSON (models/model.json inside a .pt2), an OpwireArchive, or a file an earlier `opwire convert` wrote; "
        "it is recognized from its content. Exit 0 on success, 2 on bad input. For programs that call "
        "custom ops or name custom pytree classes: " + LOADING_HELP,
    )
    p.add_argument("input", metavar="IN", help=".pt2 archive, JSON program or archive, or a file opwire wrote")
    p.add_argument("output", metavar="OUT", help="file to write")
    p.add_argument("--to", choices=TARGETS, help="output format (default: from OUT's suffix, .json, .pt2 or .opw)")
    p.add_argument("--model", help="which program of a .pt2 archive holding several (default: model)")
    p.add_argument("--allow-pickle", action="store_true", help="load pickled archive entries (trusted files only)")
    add_loading(p)
    add_budget_flags(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Convert and print one line saying what was written; exit 0."""
    suffix = Path(args.output).suffix
    target = args.to or _BY_SUFFIX.get(suffix.lower())
    if target is None:
        known = ", ".join(sorted(s for s, t in _BY_SUFFIX.items() if t in TARGETS))
        raise DecodeError(
            f"cannot tell the output format from the suffix of {args.output!r} (known: {known}): pass --to "
            f"{'|'.join(TARGETS)}"
        )
    if target not in TARGETS:
        raise DecodeError(
            f"{args.output}: this opwire cannot write {suffix} files yet; pass --to compact for an opwire archive "
            "(program and weights, Thrift compact)"
        )
    kind, size = convert(
        args.input,
        args.output,
        target,
        model=args.model,
        allow_pickle=args.allow_pickle,
        max_elements=args.max_elements,
    )
    print(f"wrote {args.output}: {kind} as {target}, {size} bytes")
    return 0


def convert(
    src: str | Path,
    dst: str | Path,
    to: str,
    *,
    model: str | None = None,
    allow_pickle: bool = False,
    max_elements: int = MAX_ELEMENTS,
) -> tuple[str, int]:
    """Convert `src` into `dst` in format `to`; returns (what was written, its size in bytes)."""
    if to not in TARGETS:
        raise DecodeError(f"unknown target format {to!r}: expected one of {', '.join(TARGETS)}")
    src, dst = Path(src), Path(dst)
    check_output(dst, [src])
    with _open(src, model, allow_pickle, max_elements) as opened:
        if to == "opw" and opened.pt2 is not None:  # straight from the mapped input: no weight read into memory
            _check_specs(opened.program)
            return "OpwireArchive", serde.opw.write(opened.pt2, dst)
        obj: _Root = opened.program if to == "json" or opened.kind == "program" else opened.archive()
    _check_specs(obj.program if isinstance(obj, m.OpwireArchive) else obj)
    if to == "opw":
        return "OpwireArchive", serde.opw.write(
            obj if isinstance(obj, m.OpwireArchive) else _bare_archive(obj, src), dst
        )
    if to == "pt2":
        archive = obj if isinstance(obj, m.OpwireArchive) else _bare_archive(obj, src)
        check_output(dst, [src])  # torch's zip writer opens the path itself: checked again just before
        serde.pt2.write(archive, dst, model=model or "model")
        return "OpwireArchive", dst.stat().st_size

    out: _Root = obj.program if to == "json" and isinstance(obj, m.OpwireArchive) else obj
    data = opwire.dumps(out, format=cast(_Codec, to))
    write_output(dst, data, [src])
    return type(out).__name__, len(data)


def _check_specs(program: m.ExportedProgram) -> None:
    """The pytree specs convert writes on must be ones torch's loader reads without importing anything."""

    for spec, where in program_specs(program):
        check_spec(spec, where)


def _open(src: Path, model: str | None, allow_pickle: bool, max_elements: int) -> OpenedProgram:
    """The input opened lazily (a .pt2's or .opw's weights stay unread until asked for)."""

    opened = program.open(src, model=model, allow_pickle=allow_pickle, max_elements=max_elements)
    if not isinstance(opened, OpenedProgram):
        raise DecodeError(
            f"{src}: holds a {type(opened).__name__}; convert handles programs (ExportedProgram) and archives "
            "(OpwireArchive)"
        )
    return opened


def _bare_archive(program: m.ExportedProgram, src: Path) -> m.OpwireArchive:
    """An archive with no tensors, for a program that binds none."""

    missing = first_missing(program, (), ())
    if missing is not None:
        raise DecodeError(
            f"{src}: the program binds {missing} but the input carries no weights; a .pt2 needs them. "
            f"Convert from the .pt2 archive or an OpwireArchive (binary/compact) instead"
        )
    return m.OpwireArchive(program=program, weights={}, constants={}, opwire_version=__version__)
