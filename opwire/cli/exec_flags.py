"""The execution-policy flags `exec`, `run` and `replay` share: `--allow-op`, `--timeout`, `--max-while-iterations`."""

from __future__ import annotations

import argparse
from typing import Any

from opwire.proxy_executor import DEFAULT_TIMEOUT, WHILE_LOOP_ITERATIONS, Limits, default_max_memory, parse_size

__all__ = ["add_exec_flags", "limits"]


def _positive(kind: type[Any]) -> Any:
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a positive {kind.__name__}, got {text!r}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"expected a positive {kind.__name__}, got {text!r}")
        return value

    return parse


def _op_names(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"expected an op name such as aten::from_file, got {text!r}")
    return names


def _size(text: str) -> int:

    try:
        return parse_size(text)
    except (ValueError, IndexError):
        raise argparse.ArgumentTypeError(f"expected a size such as 4G, 512M or 1000000, got {text!r}") from None


def limits(args: argparse.Namespace, reads: Any = ()) -> Any:
    """The sandbox limits of an isolated run from `--max-memory` and `--timeout` (CPU time: timeout x cores);
    `reads`: the files the child opens itself (the program, the inputs), the only ones outside the installation."""
    import os

    timeout = getattr(args, "timeout", None)
    cpu = None if timeout is None else timeout * max(1, os.cpu_count() or 1) + 5
    # OpenMP's pool hangs in a fork made after it ran. The `opwire` command (console script or `python -m
    # opwire.cli`) forks before any parallel work: keep torch's threads. main() called from a program that may
    # have computed already (tests, embedding): one thread.
    import sys

    argv0 = sys.argv[0] if sys.argv else ""
    fresh = argv0.endswith(("/opwire", "opwire/cli/__main__.py")) or argv0 == "opwire"
    files = tuple(str(f) for f in reads if f)
    return Limits(
        max_memory=args.max_memory, cpu_seconds=cpu, timeout=timeout, threads=None if fresh else 1, reads=files
    )


def add_exec_flags(p: argparse.ArgumentParser, timeout: bool = True, loops: bool = True) -> None:
    """Add the policy flags to a subcommand's parser (docs/executor.md#execution-policy)."""
    p.add_argument(
        "--allow-op",
        action="extend",
        type=_op_names,
        default=[],
        metavar="OP[,OP...]",
        help="run these ops although the execution policy refuses them (e.g. aten::from_file; repeatable, or "
        "comma-separated: a refusal prints the one flag that admits every refused op; `opwire ops policy OP` "
        "says why an op is refused)",
    )

    if timeout:
        p.add_argument(
            "--timeout",
            type=_positive(float),
            default=DEFAULT_TIMEOUT,
            metavar="SECONDS",
            help=f"stop with an error after this much wall time (default {DEFAULT_TIMEOUT:g}; checked between "
            "nodes, and the isolated child is stopped past it)",
        )
    p.add_argument(
        "--no-isolate",
        dest="isolate",
        action="store_false",
        help="run in this process instead of a sandboxed child (trusted files only; docs/security.md)",
    )
    p.add_argument(
        "--max-memory",
        type=_size,
        default=default_max_memory(),
        metavar="SIZE",
        help="execution-memory budget, e.g. 4G or 512M: tensor bytes a run may allocate (checked before nodes run) "
        "and the isolated child's address space beyond what it maps (plus 1G of headroom) (default: 2G)",
    )
    if loops:
        p.add_argument(
            "--max-while-iterations",
            type=_positive(int),
            default=WHILE_LOOP_ITERATIONS,
            metavar="N",
            help=f"iteration budget of one while_loop call (default {WHILE_LOOP_ITERATIONS})",
        )
