"""What `opwire.open` can return: the kinds of file opwire reads, by name, and the small handles of two of them.

A kind is what a file is *for* (a program to run, inputs to feed it, a trace to replay); a file's root type
(the model its header or JSON keys name) decides its kind through `ROOT_KINDS`. Programs and archives open
as `opwire.program.OpenedProgram`; extern-node files, whole traces, snapshots and Values files as their
models; a streamed trace as a `StreamedTrace` handle (the recording layer reads it); a findings file as a
`FindingsFile` (the view layer checks its entries).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

__all__ = ["KINDS", "ROOT_KINDS", "FindingsFile", "Kind", "StreamedTrace"]

Kind = Literal["program", "archive", "extern_nodes", "trace", "snapshot", "values", "findings"]

KINDS: dict[str, str] = {
    "program": "an exported program (JSON as torch writes it, or Thrift with opwire's header)",
    "archive": "an archive with weights (a .pt2 from torch.export.save, or an OpwireArchive)",
    "extern_nodes": "an extern-node file (AOTInductor's *.wrapper.json, or the .pt2 package holding one)",
    "trace": "a trace (`opwire record`, Trace.save)",
    "snapshot": "an op library snapshot (`opwire ops snapshot`)",
    "values": "a Values file (inputs of `opwire run`/`exec`, or the .nodes file of `opwire run --save-nodes`)",
    "findings": "a findings file (`opwire.view.findings_document`, or `opwire ops validate --json`)",
}
"""Every kind `opwire.open(..., expect=...)` takes, with what it is (the words of its errors)."""

ROOT_KINDS: dict[str, Kind] = {
    "ExportedProgram": "program",
    "OpwireArchive": "archive",
    "ExternKernelNodes": "extern_nodes",
    "CallTrace": "trace",
    "TraceFrame": "trace",
    "OpLibrarySnapshot": "snapshot",
    "Values": "values",
}
"""The kind of each root type opwire writes (header root or JSON keys)."""


@dataclass(frozen=True)
class StreamedTrace:
    """A trace streamed to a file (`opwire.record(path=...)`): read lazily by `opwire.load_trace`."""

    path: Path
    kind: Kind = "trace"


@dataclass(frozen=True)
class FindingsFile:
    """A findings document read within the budgets: its top-level JSON value, not yet checked entry by entry."""

    source: str
    document: Any = field(repr=False)
    kind: Kind = "findings"
