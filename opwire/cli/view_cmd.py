"""`opwire view FILE`: the program (or extern-node file) as one self-contained interactive HTML page."""

from __future__ import annotations

import argparse
import webbrowser
from pathlib import Path
from typing import Any

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    """Register `view`."""
    p = sub.add_parser(
        "view",
        help="draw a program or extern-node file as an interactive HTML page",
        description="Write FILE as one self-contained HTML page (no network at view time): nodes grouped by "
        "module, edges labelled with dtype and shape, higher-order-op subgraphs openable in place, a side panel "
        "per node, search. FILE is a .pt2 from torch.export.save, torch's program JSON, an opwire archive "
        "(opwire convert ... --to json|binary|compact) or an AOTInductor extern-node file (its .pt2 package or "
        "<hash>.wrapper.json); the custom ops it calls need not be importable. Findings files come from "
        "`opwire run FILE --inputs X --compare-nodes A.nodes --findings F.json` or `opwire ops validate --json` "
        "(docs/view.md). Exit 0 when the page was written, 2 on unreadable input.",
    )
    p.add_argument("file", help="a .pt2 archive, program JSON, an opwire archive (any format) or an extern-node file")
    p.add_argument("--out", default=None, help="the page to write (default: FILE with .html)")
    p.add_argument(
        "--findings",
        action="append",
        default=[],
        metavar="F.json",
        help="colour nodes from a findings file (`opwire run --compare-nodes ... --findings`, "
        "`opwire ops validate --json`); repeatable",
    )
    p.add_argument("--title", default=None, help="the page title (default: the file's name)")
    p.add_argument("--open", action="store_true", help="open the page in the default browser")
    p.add_argument("--json", action="store_true", help="print what was written as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Write the page; exit 0, or 2 when the file or a findings file is unreadable."""
    from opwire.view import view  # deferred: imports pydantic

    src = Path(args.file)
    out = Path(args.out) if args.out else src.with_name(src.name + ".html")
    view(src, out, findings=args.findings, title=args.title)
    size = out.stat().st_size
    if args.json:
        from opwire.cli.output import print_record  # deferred: imports pydantic
        from opwire.schema import models as m  # deferred: imports pydantic

        print_record(m.ViewOutput(page=str(out), bytes=size))
    else:
        print(f"wrote {out} ({size / 1024:.0f} KiB)")
    if args.open:
        webbrowser.open(out.resolve().as_uri())
    return 0
