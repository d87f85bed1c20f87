"""`convert(src, dst, to)`: a program or archive written again in another format (what `opwire convert` does).

The input is anything `open` opens as a program: a .pt2 archive (read without unpickling), a .opw archive, JSON (a
program, or an OpwireArchive), or a file opwire wrote in Thrift form. `json` writes the program alone,
byte-identical to torch's `models/model.json`; `binary`/`compact` write the whole OpwireArchive when the input is
an archive (else the program); `pt2` writes a torch archive that `torch.export.load` accepts; `opw` writes opwire's
mappable archive (from a .pt2 or .opw the weights are mapped, never copied into memory). `convert_target(path)`
tells the format from the output's suffix. Nothing here imports torch before a .pt2 is written.
"""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Literal

from opwire._version import __version__
from opwire.errors import DecodeError
from opwire.program.opened import OpenedProgram
from opwire.program.opener import open
from opwire.program.outfiles import check_output, write_output
from opwire.schema import first_missing
from opwire.schema import models as m
from opwire.serde import MAX_ELEMENTS, check_spec, dumps, opw, program_specs, pt2

__all__ = ["CONVERT_TARGETS", "ConvertTarget", "convert", "convert_target"]

ConvertTarget = Literal["json", "binary", "compact", "pt2", "opw"]
CONVERT_TARGETS: tuple[ConvertTarget, ...] = typing.get_args(ConvertTarget)
"""The formats `convert` writes."""
_BY_SUFFIX: dict[str, ConvertTarget] = {
    ".json": "json", ".pt2": "pt2", ".opw": "opw", ".bin": "binary", ".compact": "compact",
}  # fmt: skip
"""Output suffix -> format."""
_Root = m.ExportedProgram | m.OpwireArchive


def convert_target(dst: str | Path, to: str | None = None) -> ConvertTarget:
    """The format to write `dst` in: `to` when given, else the one its suffix names (a DecodeError saying which
    suffixes are known when it names none)."""
    if to is not None:
        return _checked(to)
    suffix = Path(dst).suffix
    target = _BY_SUFFIX.get(suffix.lower())
    if target is None:
        known = ", ".join(sorted(_BY_SUFFIX))
        raise DecodeError(
            f"cannot tell the output format from the suffix of {str(dst)!r} (known: {known}): name it with to= "
            f"({'|'.join(CONVERT_TARGETS)})"
        )
    return target


def convert(
    src: str | Path,
    dst: str | Path,
    to: str,
    *,
    model: str | None = None,
    allow_pickle: bool = False,
    max_elements: int = MAX_ELEMENTS,
) -> tuple[str, int]:
    """Convert the program or archive `src` into `dst` in format `to`; (the record written, its size in bytes).

    `dst` is never one of the inputs (`check_output`); the pytree specs written are ones torch's loader reads
    without importing anything; a program that binds tensors becomes a .pt2 or .opw only from an input that
    carries them. `model` picks the program of a .pt2 holding several."""
    target = _checked(to)
    src, dst = Path(src), Path(dst)
    check_output(dst, [src])
    with _open(src, model, allow_pickle, max_elements) as opened:
        if target == "opw" and opened.pt2 is not None:  # straight from the mapped input: no weight read into memory
            _check_specs(opened.program)
            return "OpwireArchive", opw.write(opened.pt2, dst)
        obj: _Root = opened.program if target == "json" or opened.kind == "program" else opened.archive()
    _check_specs(obj.program if isinstance(obj, m.OpwireArchive) else obj)
    if target == "opw":
        return "OpwireArchive", opw.write(obj if isinstance(obj, m.OpwireArchive) else _bare_archive(obj, src), dst)
    if target == "pt2":
        archive = obj if isinstance(obj, m.OpwireArchive) else _bare_archive(obj, src)
        check_output(dst, [src])  # torch's zip writer opens the path itself: checked again just before
        pt2.write(archive, dst, model=model or "model")
        return "OpwireArchive", dst.stat().st_size
    out: _Root = obj.program if target == "json" and isinstance(obj, m.OpwireArchive) else obj
    data = dumps(out, format=target)
    write_output(dst, data, [src])
    return type(out).__name__, len(data)


def _checked(to: str) -> ConvertTarget:
    for target in CONVERT_TARGETS:
        if to == target:
            return target
    raise DecodeError(f"unknown target format {to!r}: expected one of {', '.join(CONVERT_TARGETS)}")


def _check_specs(program: m.ExportedProgram) -> None:
    """The pytree specs convert writes on must be ones torch's loader reads without importing anything."""
    for spec, where in program_specs(program):
        check_spec(spec, where)


def _open(src: Path, model: str | None, allow_pickle: bool, max_elements: int) -> OpenedProgram:
    """The input opened lazily (a .pt2's or .opw's weights stay unread until asked for)."""
    opened = open(src, model=model, allow_pickle=allow_pickle, max_elements=max_elements)
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
