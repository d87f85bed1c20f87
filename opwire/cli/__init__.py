"""The `opwire` command: one subcommand per module in this package.

Each command module defines `add_parser(subparsers)` and sets `func` to a function
`(args) -> int`. Exit codes follow DESIGN.md; an opwire error is one line on stderr.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from opwire.errors import OpwireError, UnknownTargetError, printable

__all__ = ["COMMANDS", "build_parser", "main"]

# subcommand -> module defining add_parser()
COMMANDS = {
    "inspect": "opwire.cli.inspect_cmd",
    "convert": "opwire.cli.convert_cmd",
    "schema": "opwire.cli.schema_cmd",
    "exec": "opwire.cli.exec_cmd",
    "run": "opwire.cli.run_cmd",
    "record": "opwire.cli.record_cmd",
    "replay": "opwire.cli.replay_cmd",
    "diff": "opwire.cli.diff_cmd",
    "ranks": "opwire.cli.ranks_cmd",
    "ops": "opwire.cli.ops_cmd",
    "view": "opwire.cli.view_cmd",
}


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser with every subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="opwire", description="Put PyTorch operator calls and exported graphs on the wire."
    )
    from opwire._version import __version__

    parser.add_argument("--version", action="version", version=f"opwire {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for module in COMMANDS.values():
        importlib.import_module(module).add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `opwire` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        from opwire.cli.options import prepare

        prepare(args)
        return int(args.func(args))
    except OpwireError as exc:
        from opwire.cli.wording import for_cli

        message = for_cli(str(exc))
        hint = ""
        if isinstance(exc, UnknownTargetError) and hasattr(args, "imports") and "--import" not in message:
            hint = "; from the command line: --import MODULE or --load-library PATH.so"
        print(f"opwire {args.command}: error: {printable(message)}{hint}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(
            printable(f"opwire {args.command}: error: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": ")),
            file=sys.stderr,
        )
        return 2
    except (MemoryError, RecursionError) as exc:  # the last line of defence: every budget should stop these first
        what = "out of memory" if isinstance(exc, MemoryError) else "nesting deeper than the Python stack allows"
        print(
            f"opwire {args.command}: error: {what} while handling the input; it is too large or hostile",
            file=sys.stderr,
        )
        return 2


if __name__ == "__main__":
    sys.exit(main())
