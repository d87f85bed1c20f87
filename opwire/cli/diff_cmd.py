"""`opwire diff A.trace B.trace`: two recordings of the same code, aligned call by call, and what differs."""

from __future__ import annotations

import argparse
from typing import Any

import opwire
from opwire.cli.options import LOADING_HELP, add_budget_flags, add_loading

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    """Register `diff`."""
    p = sub.add_parser(
        "diff",
        help="compare two traces call by call (exit 1 when they differ)",
        description="Aligns the calls of two traces as a diff tool aligns lines (tolerating inserted or missing "
        "calls), labels each difference local or inherited (the call run again, in the sandbox, on the other trace's "
        "inputs) and reports the first local divergence, per-op differences in values and arguments, and calls only "
        "one trace made. "
        "A and B are traces from `opwire record --out A.trace -- python script.py` or `opwire.record(path=...)` "
        "(streamed or in-memory, any codec), e.g. the same script on two torch versions or devices. "
        "Exit 0 when they agree, 1 when they differ, 2 on an unreadable trace. " + LOADING_HELP,
    )
    add_loading(p)
    add_budget_flags(p)
    p.add_argument(
        "a",
        help="the first trace (any format opwire writes), or a run directory (rank<N>.trace per rank): "
        "then B is one too and the runs are compared rank by rank, the earliest divergence across ranks first "
        "(under `torchrun --nproc-per-node P -m opwire diff RUN_A RUN_B` the P processes share the ranks)",
    )
    p.add_argument("b", help="the second trace")
    p.add_argument(
        "--rtol", type=float, default=None, help="relative tolerance for floating outputs (default: per dtype)"
    )
    p.add_argument(
        "--atol", type=float, default=None, help="absolute tolerance for floating outputs (default: per dtype)"
    )
    p.add_argument("--max-mismatches", type=int, default=10, help="differences listed in the text (default 10)")
    p.add_argument(
        "--allow-op", action="append", default=[], metavar="OP",
        help="run this op again for the local/inherited labels although the execution policy refuses it (repeatable)",
    )  # fmt: skip
    p.add_argument("--json", action="store_true", help="print every difference as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Diff; exit 0 when the traces agree, 1 when they differ, 2 when one is unreadable."""
    from opwire.cli.output import print_record  # deferred: imports pydantic
    from opwire.recording.distributed import is_run  # deferred: imports torch

    if is_run(args.a) or is_run(args.b):
        from opwire.recording.distributed import diff_runs, launched_share  # deferred: imports torch

        with launched_share() as share:  # under torchrun: this process's share of the ranks
            runs = diff_runs(
                args.a, args.b, args.rtol, args.atol, args.max_mismatches, isolate=True, allow_ops=args.allow_op,
                share=share,
            )  # fmt: skip
        if not share.prints:
            pass
        elif args.json:
            print_record(runs.to_model())
        else:
            print(runs)
        return 0 if runs.ok else 1
    a = opwire.load_trace(args.a, max_elements=args.max_elements)
    b = opwire.load_trace(args.b, max_elements=args.max_elements)
    result = opwire.diff_traces(a, b, args.rtol, args.atol, args.max_mismatches, isolate=True, allow_ops=args.allow_op)
    if args.json:
        print_record(result.to_model())
    else:
        print(result)
    return 0 if result.ok else 1
