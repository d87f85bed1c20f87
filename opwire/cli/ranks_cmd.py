"""`opwire ranks RUN`: the ranks of a distributed run against each other (collective order and numerics)."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    """Register `ranks`."""
    p = sub.add_parser(
        "ranks",
        help="check the ranks of a distributed run against each other (exit 1 on findings)",
        description="RUN is the directory `torchrun --nproc-per-node N -m opwire record --out RUN -- train.py` "
        "wrote (rank0.trace ... rank<N-1>.trace). Per process group, every rank must call the same collectives in "
        "the same order with the same shapes and dtypes (the first place where they part is reported with the "
        "ranks that differ); then every collective's recorded outputs are recomputed from all ranks' recorded "
        "inputs (the first rank whose outputs disagree is named); sends are matched with receives. "
        "Exit 0 when the ranks are consistent, 1 on findings, 2 on bad input (a missing or cut rank trace, "
        "ranks of different runs or world sizes, a single-process trace). Under `torchrun --nproc-per-node P -m "
        "opwire ranks RUN` the P processes share the ranks and the checks; process 0 prints the same report.",
    )
    p.add_argument("run", help="a run directory holding rank0.trace ... rank<N-1>.trace")
    p.add_argument("--no-numerics", action="store_true", help="check collective order, shapes and dtypes only")
    p.add_argument("--max-findings", type=int, default=100, help="findings kept (default 100)")
    p.add_argument("--json", action="store_true", help="print the RanksReport record as JSON (opwire.thrift)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Check; exit 0 consistent, 1 findings, 2 bad input."""
    from opwire.cli.output import print_record  # deferred: imports pydantic
    from opwire.recording.distributed import check_ranks, format_ranks, launched_share  # deferred: imports torch

    with launched_share() as share:  # under torchrun: this process's share of the ranks
        report = check_ranks(args.run, numerics=not args.no_numerics, max_findings=args.max_findings, share=share)
    if not share.prints:
        pass
    elif args.json:
        print_record(report)
    else:
        print(format_ranks(report, args.run))
    return 1 if report.findings else 0
