"""`opwire replay TRACE`: replay a recorded trace through the proxy executor and report what differs."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import opwire
from opwire import validation
from opwire.cli.exec_flags import add_exec_flags
from opwire.cli.options import LOADING_HELP, add_budget_flags, add_device, add_loading
from opwire.proxy_executor import DefaultPolicy
from opwire.recording import distributed

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
        "mismatches, 1 with mismatches, 2 when the trace is unreadable, cut or empty.",
    )
    p.add_argument(
        "trace",
        help="a trace written by `opwire record` or Trace.save (any format), or a run directory (rank<N>.trace "
        "per rank, from `torchrun -m opwire record`): every rank replays isolated and the collectives are checked "
        "across ranks",
    )
    p.add_argument("--chained", action="store_true", help="feed each call the replayed outputs of earlier calls")
    p.add_argument(
        "--collectives",
        action="store_true",
        help="RUN only, under `torchrun --nproc-per-node N -m opwire replay RUN --collectives`: replay chained on N "
        "ranks with the collectives executed for real in a fresh process group (the only mode that runs them)",
    )
    p.add_argument(
        "--collective-timeout",
        type=float,
        default=120.0,
        help="seconds a collective may wait for the other ranks before the group aborts (default 120)",
    )
    p.add_argument(
        "--rtol", type=float, default=None, help="relative tolerance for floating outputs (default: per dtype)"
    )
    p.add_argument(
        "--atol", type=float, default=None, help="absolute tolerance for floating outputs (default: per dtype)"
    )
    p.add_argument(
        "--workers",
        type=_positive,
        default=0,
        metavar="N",
        help=f"isolated replay over N processes (default: auto, one more per {CALLS_PER_WORKER} calls up to the "
        "CPU count; a worker starts its own torch, so small traces replay fastest in one)",
    )
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
    p.add_argument("--verbose", action="store_true", help="print the per-op table even when every call matched")
    add_loading(p)
    add_budget_flags(p)
    add_exec_flags(p, loops=False)
    p.set_defaults(func=run)


CALLS_PER_WORKER = 5000
"""Calls a trace needs per worker before another process pays for its start (torch import, ~2-3 s)."""


def auto_workers(calls: int, cpus: int | None) -> int:
    """The worker count `--workers` takes by default: 1 below CALLS_PER_WORKER calls, never above the CPUs."""
    return max(1, min(cpus or 1, calls // CALLS_PER_WORKER))


def _positive(text: str) -> int:
    if text == "auto":
        return 0
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive number of workers, got {text!r}")
    return n


def run(args: argparse.Namespace) -> int:
    """Replay; exit 0 without mismatches, 1 with mismatches, 2 when the trace is unreadable, cut or empty."""

    if args.workers > 1 and args.chained:
        print(
            "opwire replay: error: --workers applies to isolated replay; drop --chained or --workers", file=sys.stderr
        )
        return 2
    from opwire.recording.distributed import is_run  # deferred: imports torch

    if is_run(args.trace) or args.collectives:
        return _run_dir(args)
    trace = opwire.load_trace(args.trace, max_elements=args.max_elements)
    workers = args.workers or (1 if args.chained else auto_workers(len(trace), os.cpu_count()))
    if args.workers > 1 and len(trace) < CALLS_PER_WORKER:
        print(
            f"opwire replay: note: {args.workers} workers for {len(trace)} calls; each worker starts its own torch, "
            f"so below {CALLS_PER_WORKER} calls one worker is faster (drop --workers for the automatic choice)",
            file=sys.stderr,
        )
    report = opwire.replay(
        trace,
        policy=args.policy,
        mode="chained" if args.chained else "isolated",
        rtol=args.rtol,
        atol=args.atol,
        device=args.device,
        workers=workers,
        max_mismatches=args.max_mismatches,
        allow_ops=args.allow_op,
        timeout=args.timeout,
        isolate=args.isolate,
        max_memory=args.max_memory,
    )
    report.verbose = args.verbose
    if args.json:
        from opwire.cli.output import print_record  # deferred: imports pydantic

        print_record(
            report.to_model(validation.replay_findings(report))
        )  # findings: the one Finding shape (docs/errors.md)
    else:
        print(report)
    if not report.complete:
        print(
            f"opwire replay: error: {args.trace} is incomplete: {report.missing}; a cut or empty trace cannot pass "
            "(record it again: opwire record --out TRACE -- python script.py)",
            file=sys.stderr,
        )
        return 2
    return 0 if report.ok else 1


def _run_dir(args: argparse.Namespace) -> int:
    """Replay a run directory: every rank in a sandboxed child, or chained with real collectives under torchrun."""
    if args.collectives:
        from opwire.recording.distributed import replay_live  # deferred: imports torch

        return replay_live(
            args.trace, args.rtol, args.atol, args.collective_timeout, args.allow_op, args.json,
            validation.replay_findings, isolate=args.isolate, max_memory=args.max_memory,
        )  # fmt: skip
    if args.chained or args.workers > 1:
        print(
            "opwire replay: error: a run directory replays isolated in one process, or chained with real "
            "collectives under torchrun with --collectives; drop --chained/--workers",
            file=sys.stderr,
        )
        return 2
    from opwire.recording.distributed import launched_share  # deferred: imports pydantic

    with launched_share() as share:  # under torchrun: this process's share of the ranks
        result = distributed.replay_run(
            args.trace, args.rtol, args.atol, allow_ops=args.allow_op, timeout=args.timeout,
            max_mismatches=args.max_mismatches, isolate=args.isolate, max_memory=args.max_memory, share=share,
        )  # fmt: skip
    if not share.prints:
        pass
    elif args.json:
        from opwire.cli.output import print_record  # deferred: imports pydantic

        print_record(result.to_model(validation.replay_findings))
    else:
        print(result)
    return 0 if result.ok else 1
