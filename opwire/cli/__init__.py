"""The `opwire` command: one subcommand per module in this package.

Each command module defines `add_parser(subparsers)` and sets `func` to a function
`(args) -> int`. Exit codes follow DESIGN.md; an opwire error is one line on stderr.

The parser is built from `COMMANDS`, a table of each subcommand's module and one-line summary: `main` imports
only the module of the command chosen on the command line (none for `opwire --help` or `--version`), and every
other command is listed from its summary, so a command pays for its own imports and nobody else's.

The commands that only read files into models and write what they read (`inspect`, `convert` without
`--allow-pickle`, `schema`) run with the cyclic garbage collector paused (`Command.pauses_collector`) from before
their modules import, restored when they return: the process is opwire's own, it runs no user code, and what the
decoders build is acyclic (reference counting frees it; the decode budgets, not the collector, bound memory).
Its full passes over a freshly decoded 2,000-node program were about 0.3 of `inspect model.pt2`'s 0.8-1 CPU-s.

Modules:
    __main__: `python -m opwire.cli`
    convert_cmd: `opwire convert`: programs and archives between JSON, Thrift, .pt2 and .opw
    diff_cmd: `opwire diff`: two traces, or two run directories, compared call by call
    exec_cmd: `opwire exec`: every node of an extern-node file run in order
    exec_flags: the execution-policy flags `exec`, `run` and `replay` share (`--allow-op`, `--timeout`, ...)
    inspect_cmd: `opwire inspect`: a summary of a program, extern-node file, trace or archive
    ops_cmd: `opwire ops validate|snapshot|bc-check|policy`: op validation and the op policy's verdicts
    options: options every command shares: the user's op libraries (`--import`, `--load-library`), `--device`
    output: how every `--json` prints: an IDL record through opwire's JSON codec
    ranks_cmd: `opwire ranks`: the ranks of a distributed run against each other
    record_cmd: `opwire record`: every operator call a script makes, recorded
    replay_cmd: `opwire replay`: a trace replayed through the proxy executor, and what differs
    run_cmd: `opwire run`: a serialized program run node by node
    schema_cmd: `opwire schema diff`: IDL changes and the version bump each needs
    values: the inputs files of `run` and `exec`, and values as JSON
    view_cmd: `opwire view`: a program or extern-node file as an interactive HTML page
    wording: errors in command-line words instead of the library's Python advice
"""

from __future__ import annotations

import argparse
import gc
import importlib
import sys
from collections.abc import Sequence
from typing import NamedTuple

from opwire import __version__
from opwire.errors import OpwireError, UnknownTargetError, printable

__all__ = ["COMMANDS", "Command", "build_parser", "main"]


class Command(NamedTuple):
    """A subcommand: the module defining its `add_parser`, its line in `opwire --help`, and whether it pauses the
    cyclic collector while it runs (it reads files into models and runs no user code)."""

    module: str
    summary: str
    pauses_collector: bool = False


COMMANDS = {
    "inspect": Command("opwire.cli.inspect_cmd", "summarize a program, extern-node file, trace or archive", True),
    "convert": Command(
        "opwire.cli.convert_cmd",
        "convert programs and archives between JSON, Thrift binary/compact, .pt2 and .opw",
        True,
    ),
    "schema": Command("opwire.cli.schema_cmd", "work with the Thrift IDL (schema diff)", True),
    "exec": Command(
        "opwire.cli.exec_cmd", "run the nodes of an extern-node file (AOTInductor's <hash>.wrapper.json or .pt2)"
    ),
    "run": Command("opwire.cli.run_cmd", "run a serialized program (archive, .pt2, or program JSON) node by node"),
    "record": Command("opwire.cli.record_cmd", "run a Python script in-process and record its operator calls"),
    "replay": Command("opwire.cli.replay_cmd", "replay a recorded trace and compare outputs (exit 1 on any mismatch)"),
    "diff": Command("opwire.cli.diff_cmd", "compare two traces call by call (exit 1 when they differ)"),
    "ranks": Command(
        "opwire.cli.ranks_cmd", "check the ranks of a distributed run against each other (exit 1 on findings)"
    ),
    "ops": Command("opwire.cli.ops_cmd", "validate custom ops, snapshot op libraries, check backward compatibility"),
    "view": Command("opwire.cli.view_cmd", "draw a program or extern-node file as an interactive HTML page"),
}
"""Subcommand -> its module and summary; a test checks each summary against the help its module registers."""


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The argparse parser: every subcommand registered in full, or with `only`, that one alone in full.

    The others are then listed by their summary, which is all `opwire --help` and a usage error show of them.
    """

    parser = argparse.ArgumentParser(
        prog="opwire", description="Put PyTorch operator calls and exported graphs on the wire."
    )
    parser.add_argument("--version", action="version", version=f"opwire {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, command in COMMANDS.items():
        if only is None or name == only:
            importlib.import_module(command.module).add_parser(sub)
        else:
            sub.add_parser(name, help=command.summary)
    return parser


def _chosen(argv: Sequence[str]) -> str:
    """The subcommand named on the command line, or "" (the top-level parser takes no option with a value)."""
    return next((arg for arg in argv if not arg.startswith("-")), "")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `opwire` console script."""
    if argv is None:
        argv = sys.argv[1:]
    chosen = _chosen(argv)
    # a command that pauses the collector pauses it from the start: importing its modules (class creation) is
    # acyclic allocation too, and the collector's passes over it were ~20 ms of `inspect`
    paused = chosen in COMMANDS and COMMANDS[chosen].pauses_collector and gc.isenabled()
    if paused:
        gc.disable()
    try:
        args = build_parser(only=chosen).parse_args(argv)
        if args.command != chosen:  # argparse read the command line otherwise than `_chosen`: parse it with that one
            args = build_parser(only=args.command).parse_args(argv)
        # `--allow-pickle` unpickles (runs) what a trusted file holds: the collector keeps running for it
        if paused and (not COMMANDS[args.command].pauses_collector or getattr(args, "allow_pickle", False)):
            gc.enable()
            paused = False
        return _run(args)
    finally:
        if paused:
            gc.enable()


def _run(args: argparse.Namespace) -> int:
    """Run the parsed command; an opwire error, an OS error or an exhausted resource is one line on stderr."""
    try:
        from opwire.cli.options import prepare  # deferred: imports opwire.serde's budgets (--help loads no codec)

        prepare(args)
        return int(args.func(args))
    except OpwireError as exc:
        from opwire.cli.wording import for_cli  # deferred: imports opwire.serde's budgets (--help loads no codec)

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
