"""The execution-policy flags `exec`, `run` and `replay` share: `--allow-op`, `--timeout`, `--max-while-iterations`."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["add_exec_flags"]


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


def add_exec_flags(p: argparse.ArgumentParser, timeout: bool = True, loops: bool = True) -> None:
    """Add the policy flags to a subcommand's parser (docs/executor.md#execution-policy)."""
    p.add_argument(
        "--allow-op",
        action="append",
        default=[],
        metavar="OP",
        help="run this op although the execution policy refuses it (e.g. aten::from_file; repeatable)",
    )
    if timeout:
        p.add_argument(
            "--timeout",
            type=_positive(float),
            default=None,
            metavar="SECONDS",
            help="stop with an error after this much wall time (checked between nodes; default: no limit)",
        )
    if loops:
        from opwire.proxy_executor.budgets import WHILE_LOOP_ITERATIONS

        p.add_argument(
            "--max-while-iterations",
            type=_positive(int),
            default=WHILE_LOOP_ITERATIONS,
            metavar="N",
            help=f"iteration budget of one while_loop call (default {WHILE_LOOP_ITERATIONS})",
        )
