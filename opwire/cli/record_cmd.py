"""`opwire record --out TRACE -- python SCRIPT.py [ARGS]`: record every operator call a script makes."""

from __future__ import annotations

import argparse
import importlib.util
import os
import runpy
import sys
import traceback
from pathlib import Path
from typing import Any

import opwire
from opwire.errors import OpwireError, printable
from opwire.program import check_output

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    """Register `record`."""
    p = sub.add_parser(
        "record",
        help="run a Python script in-process and record its operator calls",
        description="Runs `python SCRIPT.py ARGS` or `python -m MODULE ARGS` in this process under opwire.record "
        "and writes the trace (also when the script fails: exit 1, after the script's own traceback). The script "
        "is any Python program that calls torch ops (training step, inference); the trace it writes is read by "
        "`opwire replay TRACE`, `opwire inspect TRACE` and opwire.load_trace. Under torchrun "
        "(`torchrun --nproc-per-node N -m opwire record --out RUN -- train.py`) every rank writes RUN/rank<N>.trace. "
        "Exit 0, 1 when the script failed, "
        "2 on bad usage (no script, --out not writable).",
        usage="opwire record --out TRACE [options] -- python SCRIPT.py [ARGS] | -- python -m MODULE [ARGS]",
    )
    p.add_argument("--out", required=True, help="where to write the trace (checked writable before the script runs)")
    p.add_argument(
        "--format",
        default="stream",
        choices=("stream", "compact", "binary", "json"),
        help="stream (default): written to disk as the calls happen, memory stays bounded; "
        "compact/binary/json: kept in memory and written at the end (small traces)",
    )
    p.add_argument("--no-locations", action="store_true", help="do not record each call's source line and module")
    p.add_argument("--include", action="append", default=None, help="record only ops matching (ns::op.overload glob)")
    p.add_argument("--exclude", action="append", default=[], help="do not record ops matching this glob")
    p.add_argument("--digest", action="store_true", help="keep digests instead of bytes for outputs nobody reads")
    p.add_argument("--no-defaults", action="store_true", help="write only the arguments the caller passed")
    p.add_argument(
        "script_command",
        metavar="COMMAND",
        nargs=argparse.REMAINDER,
        help="-- python SCRIPT.py [ARGS] (or python -m MODULE)",
    )
    p.set_defaults(func=run)


def _target(command: list[str]) -> tuple[str, str, list[str]] | None:
    """("path" | "module", what, argv) of `python SCRIPT.py ARGS`, `python -m MOD ARGS` or `SCRIPT.py ARGS`."""
    if command and command[0] == "--":
        command = command[1:]
    if command and Path(command[0]).name.startswith("python") and not command[0].endswith(".py"):
        command = command[1:]
    if len(command) >= 2 and command[0] == "-m":
        return "module", command[1], command[1:]
    if command and command[0].endswith(".py"):
        return "path", command[0], command
    return None


def _module_exists(name: str) -> bool:
    """Whether `python -m name` would find the module (the working directory first, as `-m` searches)."""
    saved = sys.path[:]
    sys.path.insert(0, os.getcwd())
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a parent package that does not exist, or an empty name
        return False
    finally:
        sys.path[:] = saved


def _unwritable(out: Path, inputs: list[str]) -> str | None:
    """Why the trace could not be written to `out` (None when it can), found before the script runs."""

    try:
        check_output(out, inputs)  # no symlink, FIFO, device or the script itself
    except OpwireError as exc:
        return str(exc)
    existed = out.exists()
    try:
        with out.open("ab"):
            pass
    except OSError as exc:
        return f"cannot write the trace there ({exc.strerror or exc})"
    if not existed:
        out.unlink()
    return None


def _rank_out(out: str) -> str:
    """Under a launcher (RANK/WORLD_SIZE set, e.g. torchrun), `--out RUN` is a run directory: RUN/rank<N>.trace."""
    from opwire.recording import launch_info, rank_file  # deferred: imports pydantic

    info = launch_info()
    if info is None:
        return out
    if "{rank}" in out:
        return out.replace("{rank}", str(info.rank))
    Path(out).mkdir(parents=True, exist_ok=True)
    return str(rank_file(out, info.rank))


def _print_script_traceback(exc: BaseException) -> None:
    """The script's traceback as Python prints it, starting at the script's own frames (not runpy's or opwire's)."""
    tb = exc.__traceback__
    skip = ("<frozen runpy>", os.path.dirname(runpy.__file__ or "") + os.sep, os.path.abspath(__file__))
    while tb is not None and tb.tb_next is not None and tb.tb_frame.f_code.co_filename.startswith(skip):
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb, file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    """Record the script; exit 0, 1 when the script failed, 2 on bad usage."""

    target = _target(list(args.script_command))
    if target is None:
        print(
            f"opwire record: error: expected `-- python SCRIPT.py [ARGS]` or `-- python -m MODULE [ARGS]`, "
            f"got {' '.join(args.script_command) or 'no command'}; the script runs in this process so it can be "
            "recorded",
            file=sys.stderr,
        )
        return 2
    kind, what, argv = target
    if kind == "path" and not Path(what).is_file():
        print(f"opwire record: error: no script {what!r}", file=sys.stderr)
        return 2
    if kind == "module" and not _module_exists(what):
        print(
            printable(
                f"opwire record: error: no module {what!r} (searched as `python -m` does: the working directory "
                f"{os.getcwd()}, then sys.path)"
            ),
            file=sys.stderr,
        )
        return 2
    args.out = _rank_out(args.out)
    problem = _unwritable(Path(args.out), [what] if kind == "path" else [])
    if problem is not None:
        print(printable(f"opwire record: error: --out {args.out}: {problem}; the script did not run"), file=sys.stderr)
        return 2
    status = 0
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = argv
    # as python does: a script's own directory first, or the working directory for `-m`
    sys.path.insert(0, os.path.dirname(os.path.abspath(what)) if kind == "path" else os.getcwd())
    streamed = args.format == "stream"
    # deferred: the distributed package is lazy, and this command's parser needs none of it
    from opwire.recording.distributed import young_heap

    # what is alive now (torch, the CLI: ~300k objects) never becomes the script's garbage: out of the collector's
    # full passes while the script runs, which otherwise walked it again and again (a quarter of a recording's CPU)
    with (
        young_heap(),
        opwire.record(
            include=args.include,
            exclude=args.exclude,
            outputs="digest" if args.digest else "full",
            write_defaults=not args.no_defaults,
            path=args.out if streamed else None,
            locations=not args.no_locations,
        ) as trace,
    ):
        try:
            if kind == "path":
                runpy.run_path(what, run_name="__main__")
            else:
                runpy.run_module(what, run_name="__main__", alter_sys=True)
        except SystemExit as exc:
            status = 0 if exc.code in (None, 0) else 1
        except Exception as exc:  # the script's own failure: its traceback, then the trace is kept
            _print_script_traceback(exc)
            print(f"opwire record: the script raised {type(exc).__name__}: {exc}", file=sys.stderr)
            status = 1
        finally:
            sys.argv, sys.path[:] = saved_argv, saved_path
    if not streamed:
        trace.save(args.out, format=args.format)
    print(f"recorded {len(trace)} calls, {len(trace.names())} tensors -> {args.out}", file=sys.stderr)
    return status
