"""`opwire.view`: an exported program (or an extern-node file) as one self-contained interactive HTML page.

The program is read with opwire's own decoders (never `torch.export.load`), so a page can be made for a
program whose custom ops are not importable here, or that another torch of the same major wrote.

Modules:
    describe: arguments, tensor metadata and node metadata as the short text the page shows
    model: a program or extern-node file as the page's data: graphs, module groups, metadata, sources
    overlays: findings files for `--findings`: read, checked and keyed for the page
    page: the self-contained HTML page: the data as JSON, the stylesheet and scripts (`static/`) inline
    runs: node-by-node comparison of two runs of one program (`run --save-nodes` / `--compare-nodes`)
"""

from __future__ import annotations

import sys
import types
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from opwire import program, serde
from opwire._lazy import lazy_getattr, lazy_names
from opwire.errors import DecodeError
from opwire.program import OpenedProgram, Source
from opwire.program.outfiles import write_output
from opwire.schema import models as m
from opwire.view.model import page_data
from opwire.view.overlays import findings_document, findings_json, load_findings, merge_findings
from opwire.view.page import render_page

# public name -> module that defines it, imported on first use: node-by-node runs import torch, a page needs none
_LAZY = {
    "NodeComparer": "opwire.view.runs",
    "NodeRecorder": "opwire.view.runs",
    "read_nodes": "opwire.view.runs",
}

if TYPE_CHECKING:  # what mypy and IDEs see for the lazy names
    import torch

    from opwire.view.runs import NodeComparer as NodeComparer
    from opwire.view.runs import NodeRecorder as NodeRecorder
    from opwire.view.runs import read_nodes as read_nodes

__all__ = [
    "findings_document",
    "findings_json",
    "load_findings",
    "load_viewable",
    "render_html",
    "view",
]
__all__ += lazy_names(_LAZY, __all__)

__getattr__ = lazy_getattr(__name__, __path__, _LAZY)  # also `opwire.view.<submodule>` without importing it first

Viewable = m.ExportedProgram | m.OpwireArchive | m.ExternKernelNodes


def load_viewable(obj: Source) -> Viewable:
    """A program, archive or extern-node file from a path or a model (a torch ExportedProgram is serialized)."""

    if type(obj).__module__.startswith("torch.") and type(obj).__name__ == "ExportedProgram":
        # the program alone: no weight is copied to draw it (the face imports torch on this call only)
        obj = serde.from_exported_program(cast("torch.export.ExportedProgram", obj))
    elif isinstance(obj, str | Path | OpenedProgram) or type(obj).__name__ == "Pt2Archive":
        obj = program.open(obj)
    if isinstance(obj, OpenedProgram):
        obj = obj.program  # the program alone: no weight is read to draw it
    if not isinstance(obj, m.ExportedProgram | m.OpwireArchive | m.ExternKernelNodes):
        raise DecodeError(
            f"Expected an exported program, an OpwireArchive or an extern-node file, got {type(obj).__name__}; "
            "`opwire inspect` tells what a file holds"
        )
    return obj


def render_html(program_or_archive: Source, findings: Sequence[str | Path] = (), title: str | None = None) -> str:
    """The page for a program, archive or extern-node file (a path or a model), with findings files drawn on it."""
    obj = load_viewable(program_or_archive)
    if title is None:
        title = Path(program_or_archive).name if isinstance(program_or_archive, str | Path) else type(obj).__name__
    data = page_data(obj, title)
    data["findings"] = merge_findings([load_findings(f) for f in findings])
    return render_page(data)


def view(
    program_or_archive: Source, path: str | Path, findings: Sequence[str | Path] = (), title: str | None = None
) -> Path:
    """Write the interactive page of a program, archive or extern-node file to `path`; returns the path."""
    out = Path(path)
    inputs = [program_or_archive] if isinstance(program_or_archive, str | Path) else []
    write_output(out, render_html(program_or_archive, findings, title).encode("utf-8"), [*inputs, *findings])
    return out


class _CallableModule(types.ModuleType):
    """`opwire.view(...)` is the function even after `import opwire.view` made `opwire.view` this module.

    Python binds a package attribute to its submodule on import, which would shadow the face's lazy
    `opwire.view` function; calling the module calls `view`, so both spellings work.
    """

    def __call__(
        self, program_or_archive: Any, path: str | Path, findings: Sequence[str | Path] = (), title: str | None = None
    ) -> Path:
        return view(program_or_archive, path, findings, title)


sys.modules[__name__].__class__ = _CallableModule
