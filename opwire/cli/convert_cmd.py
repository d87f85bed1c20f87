"""`opwire convert IN OUT --to json|binary|compact|pt2|opw`: programs and archives between formats.

The input is recognized from its content: a zip (a torch .pt2 archive, read without unpickling),
a .opw archive (its magic), JSON (a program, or an OpwireArchive), or a file opwire wrote in Thrift
form (its header says what it holds). `json` writes the program alone, byte-identical to torch's
`models/model.json`; `binary`/`compact` write the whole OpwireArchive when the input is an archive
(else the program); `pt2` writes a torch archive that `torch.export.load` accepts; `opw` writes
opwire's mappable archive (from a .pt2 or .opw the weights are mapped, never copied into memory).
The conversion itself is the library's `opwire.program.convert`.
"""

from __future__ import annotations

import argparse
from typing import Any

from opwire import program
from opwire.cli.options import LOADING_HELP, add_budget_flags, add_loading

__all__ = ["add_parser", "run"]


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
    p.add_argument(
        "--to", choices=program.CONVERT_TARGETS, help="output format (default: from OUT's suffix, .json, .pt2 or .opw)"
    )
    p.add_argument("--model", help="which program of a .pt2 archive holding several (default: model)")
    p.add_argument("--allow-pickle", action="store_true", help="load pickled archive entries (trusted files only)")
    add_loading(p)
    add_budget_flags(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Convert and print one line saying what was written; exit 0."""
    target = program.convert_target(args.output, args.to)
    kind, size = program.convert(
        args.input,
        args.output,
        target,
        model=args.model,
        allow_pickle=args.allow_pickle,
        max_elements=args.max_elements,
    )
    print(f"wrote {args.output}: {kind} as {target}, {size} bytes")
    return 0
