"""`opwire replay TRACE`: replay a recorded trace through the proxy executor and report what differs."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from opwire.cli.exec_flags import add_exec_flags
from opwire.cli.options import LOADING_HELP, add_budget_flags, add_device, add_loading
from opwire.proxy_executor.policy import DefaultPolicy

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    """Register `replay`."""
    p = sub.add_parser(
        "replay",
        help="replay a recorded trace and compare outputs (exit 1 on any mismatch)",
        description="Replay every call of TRACE through the proxy executor and compare each output with the "
        "recorded one. TRACE is a file written by `opwire record --out TRACE -- python script.py` or by "
        "`trace.save(path)` after `with opwire.record() as trace:` (JSON, binary or compact; the header says "
        "which). Custom ops the trace calls must be registered first: " + LOADING_HELP + " Exit 0 without "
        "mismatches, 1 with mismatches, 2 when the trace is unreadable.",
    )
    p.add_argument("trace", help="a trace written by `opwire record` or Trace.save (any format)")
    p.add_argument("--chained", action="store_true", help="feed each call the replayed outputs of earlier calls")
    p.add_argument(
        "--rtol", type=float, default=None, help="relative tolerance for floating outputs (default: per dtype)"
    )
    p.add_argument(
        "--atol", type=float, default=None, help="absolute tolerance for floating outputs (default: per dtype)"
    )
    p.add_argument("--workers", type=_positive, default=1, help="isolated replay over N processes (default 1)")
    p.add_argument(
        "--max-mismatches", type=int, default=10, help="mismatches listed in the text report (default 10; --json: all)"
    )
    add_device(p, "replay")
    p.add_argument(
        "--policy",
        default=DefaultPolicy.FROM_SCHEMA.value,
        choices=[p.value for p in DefaultPolicy],
        help="who fills arguments the trace omits (docs/policies.md)",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    add_loading(p)
    add_budget_flags(p)
    add_exec_flags(p, loops=False)
    p.set_defaults(func=run)


def _positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive number of workers, got {text!r}")
    return n


def run(args: argparse.Namespace) -> int:
    """Replay; exit 0 without mismatches, 1 with mismatches, 2 when the trace is unreadable."""
    import opwire

    if args.workers > 1 and args.chained:
        print(
            "opwire replay: error: --workers applies to isolated replay; drop --chained or --workers", file=sys.stderr
        )
        return 2
    trace = opwire.load_trace(args.trace, max_elements=args.max_elements)
    report = opwire.replay(
        trace,
        policy=args.policy,
        mode="chained" if args.chained else "isolated",
        rtol=args.rtol,
        atol=args.atol,
        device=args.device,
        workers=args.workers,
        max_mismatches=args.max_mismatches,
        allow_ops=args.allow_op,
        timeout=args.timeout,
        isolate=args.isolate,
        max_memory=args.max_memory,
    )
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print(report)
    return 0 if report.ok else 1
