"""`opwire inspect FILE`: a summary of a program, extern-node file, trace or archive."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from opwire import program, recording
from opwire.cli.options import LOADING_HELP, add_budget_flags, add_loading
from opwire.cli.output import print_record
from opwire.schema import models as m

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    """Register `inspect`."""
    p = sub.add_parser(
        "inspect",
        help="summarize a program, extern-node file, trace or archive",
        description="Summarize FILE, recognized from its content: a program's signature (user inputs and "
        "outputs with dtype, shape, symbolic ranges and device; parameters, buffers, constants), an extern-node "
        "file's ops and the names its nodes read that no node produces (what `opwire exec --inputs` must give), "
        "a trace's ops, a snapshot or a Values file. FILE is torch's program JSON (models/model.json of a .pt2), "
        "a .pt2 archive (torch.export.save; weights are never read), an AOTInductor package or its "
        "<hash>.wrapper.json, or any file opwire wrote (opwire convert, opwire record, Trace.save, ops snapshot). "
        "Exit 0, or 2 when the file is unreadable. " + LOADING_HELP,
    )
    p.add_argument("file", help="JSON program, extern-node JSON, .pt2 archive, or a file opwire wrote")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument(
        "--verify",
        action="store_true",
        help="check the CRC-32 of every entry of a .pt2 or blob of a .opw, or the SHA-256 of every payload of a "
        "streamed trace (reads the whole file once, keeps nothing)",
    )
    add_loading(p)
    add_budget_flags(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print the summary; exit 0, or 2 when the file is unreadable."""

    path = Path(args.file)
    obj = program.open(path, max_elements=args.max_elements)  # judged by its first bytes, within the budgets
    if isinstance(obj, program.StreamedTrace):  # the recording layer reads streamed traces, the program layer the rest
        record = recording.stream_summary(obj, verify=args.verify)
    else:
        record = program.summary(obj, path, verify=args.verify)
    if args.json:
        print_record(record)
    else:
        print(_render(record))
    return 0


def _render(record: m.InspectOutput) -> str:
    """The summary as text: one line per field that applies, in the record's order."""
    lines = []
    for key, value in record:
        if value is None:
            continue
        if key in ("inputs", "outputs"):
            lines.append(f"{key}:" if value else f"{key}: none")
            lines += [f"  {_port_text(p)}" for p in value]
        elif key == "ranges":
            if value:
                lines.append("ranges:")
                lines += [f"  {k:<20} {_range_text(r)}" for k, r in value.items()]
        elif key == "reads":
            head = "reads (names no node produces: give them in `opwire exec --inputs`):"
            lines.append(head if value else "reads: none")
            lines += [f"  [{e.index}] {e.name} {e.op}: {', '.join(e.reads)}" for e in value]
        elif isinstance(value, dict):
            lines.append(f"{key}:")
            lines += [f"  {k:<48} {v}" for k, v in value.items()]
        else:
            lines.append(f"{key}: {value}")
    return "\n".join(lines)


def _port_text(port: m.ProgramPort) -> str:
    if port.kind == "Tensor":
        shape = ", ".join(port.symbolic_shape or [str(d) for d in port.shape or ()])
        return f"{port.name:<20} {port.dtype}[{shape}] on {port.device}"
    value = f" = {port.value.value!r}" if port.value is not None and port.value.type != "as_none" else ""
    value = " = None" if port.value is not None and port.value.type == "as_none" else value
    constant = " (constant: the program was exported with this value)" if port.constant else ""
    return f"{port.name:<20} {port.kind}{value}{constant}"


def _range_text(r: m.RangeConstraint) -> str:
    lo = "-inf" if r.min_val is None else r.min_val
    hi = "inf" if r.max_val is None else r.max_val
    return f"{lo}..{hi}"
