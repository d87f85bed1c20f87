"""`opwire replay TRACE`: replay a recorded trace through the proxy executor and report what differs."""

from __future__ import annotations

import argparse
import json
from typing import Any

from opwire.cli.exec_flags import add_exec_flags
from opwire.proxy_executor.policy import DefaultPolicy

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    """Register `replay`."""
    p = sub.add_parser("replay", help="replay a recorded trace and compare outputs (exit 1 on any mismatch)")
    p.add_argument("trace", help="a trace written by `opwire record` or Trace.save (any format)")
    p.add_argument("--chained", action="store_true", help="feed each call the replayed outputs of earlier calls")
    p.add_argument("--rtol", type=float, default=1e-5, help="relative tolerance for floating outputs (default 1e-5)")
    p.add_argument("--atol", type=float, default=1e-6, help="absolute tolerance for floating outputs (default 1e-6)")
    p.add_argument("--device", default=None, help="replay on this device instead of the recorded one (e.g. cuda:0)")
    p.add_argument(
        "--policy",
        default=DefaultPolicy.FROM_SCHEMA.value,
        choices=[p.value for p in DefaultPolicy],
        help="who fills arguments the trace omits (docs/policies.md)",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    add_exec_flags(p, loops=False)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Replay; exit 0 without mismatches, 1 with mismatches, 2 when the trace is unreadable."""
    import opwire

    trace = opwire.load_trace(args.trace)
    report = opwire.replay(
        trace,
        policy=args.policy,
        mode="chained" if args.chained else "isolated",
        rtol=args.rtol,
        atol=args.atol,
        device=args.device,
        allow_ops=args.allow_op,
        timeout=args.timeout,
    )
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print(report)
    return 0 if report.ok else 1
