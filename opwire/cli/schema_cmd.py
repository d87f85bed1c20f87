"""`opwire schema diff OLD NEW`: IDL changes and the version bump each needs."""

from __future__ import annotations

import argparse
from typing import Any

from opwire.schema import required_bump, schema_diff

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    """Register `schema` and its `diff` subcommand."""
    p = sub.add_parser("schema", help="work with the Thrift IDL (schema diff)")
    verbs = p.add_subparsers(dest="schema_command", metavar="SUBCOMMAND")
    verbs.required = True
    d = verbs.add_parser(
        "diff",
        help="list IDL changes and the bump each needs",
        description="Compare two IDL files by opwire/schema/README.md's compatibility rules. "
        "Exit 0 when no change needs a major bump, 1 when one does, 2 on bad input.",
    )
    d.add_argument("old", help="the old .thrift file (its includes are read from beside it)")
    d.add_argument("new", help="the new .thrift file")
    d.add_argument("--json", action="store_true", help="print the changes as JSON")
    d.add_argument("--all", action="store_true", help="also list changes that need no bump (docs, constants)")
    d.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print the changes; exit 1 when a major bump is needed."""
    from pathlib import Path

    changes = schema_diff(Path(args.old), Path(args.new))
    bump = required_bump(changes)
    shown = changes if args.all or args.json else [c for c in changes if c.bump != "none"]
    if args.json:
        from opwire.cli.output import print_record  # deferred: imports pydantic
        from opwire.schema import models as m  # deferred: imports pydantic

        print_record(m.SchemaDiffOutput(bump=bump, changes=[c.to_model() for c in shown]))
    else:
        for c in shown:
            print(f"{c.bump:5}  {c.code:22}  {c.message}")
        hidden = len(changes) - len(shown)
        extra = f" ({hidden} more needing no bump; --all lists them)" if hidden else ""
        print(f"needs: {bump} bump, {len(changes)} change{'s' if len(changes) != 1 else ''}{extra}")
    return 1 if bump == "major" else 0
