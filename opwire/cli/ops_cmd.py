"""`opwire ops validate|snapshot|bc-check|policy`: op validation for custom-op authors, and the op policy's verdicts.

Exit codes: 0 clean, 1 error findings (validate), breaking changes under --policy (bc-check) or a refused op
(policy), 2 bad usage.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import opwire
from opwire.cli.options import add_loading
from opwire.program import check_output, write_output
from opwire.proxy_executor import DefaultPolicy

__all__ = ["add_parser", "run_bc_check", "run_policy", "run_snapshot", "run_validate"]


def add_parser(sub: Any) -> None:
    """Register `ops` and its validate, snapshot and bc-check subcommands."""
    p = sub.add_parser("ops", help="validate custom ops, snapshot op libraries, check backward compatibility")
    verbs = p.add_subparsers(dest="ops_command", metavar="SUBCOMMAND")
    verbs.required = True

    v = verbs.add_parser(
        "validate",
        help="check ops for export, serialization, AOTInductor and vmap",
        description="Report every way an op will fail in export, serialization, AOTInductor and vmap. TARGET is "
        "an op as the dispatcher names it (mylib::scale, mylib::scale.default) or a whole namespace (mylib); "
        "load the library that registers it with --import MODULE (a Python file that calls torch.library) or "
        "--load-library PATH.so. --sample-inputs MODULE:FUNC names a function FUNC(op_name) returning a list of "
        "(args, kwargs) pairs, e.g. [((torch.randn(3),), {})], for torch.library.opcheck and a record/replay round "
        "trip. Exit 0 when no finding is an error, 1 when one is, 2 on bad usage.",
    )
    v.add_argument("targets", nargs="+", metavar="TARGET", help="ns::op, ns::op.overload or a namespace")
    add_loading(v)
    v.add_argument("--sample-inputs", metavar="MODULE:FUNC", help="FUNC(op_name) -> (args, kwargs) pairs for opcheck")
    v.add_argument("--json", action="store_true", help="print the reports as JSON")
    v.set_defaults(func=run_validate)

    s = verbs.add_parser(
        "snapshot",
        help="write a stable snapshot of every op in some namespaces",
        description="Write an OpLibrarySnapshot of every op in the namespaces (schema, arguments, defaults, "
        "aliasing, tags; sorted, no addresses or timestamps) to stdout or --out. JSON is indented with sorted keys "
        "so snapshots diff well in review; keep one in the repository and compare with `opwire ops bc-check "
        "SNAPSHOT --import MODULE`. Load the ops with --import MODULE or --load-library PATH.so. Exit 0, 2 on bad "
        "usage.",
    )
    s.add_argument("namespaces", nargs="+", metavar="NS", help="namespaces to snapshot")
    add_loading(s)
    s.add_argument("--format", choices=("json", "compact", "binary"), default="json", help="output format")
    s.add_argument("--out", metavar="FILE", help="write to FILE instead of stdout")
    s.set_defaults(func=run_snapshot)

    b = verbs.add_parser(
        "bc-check",
        help="classify the changes between two versions of an op library",
        description="Compare OLD with NEW and classify every change (removed ops, renamed or retyped arguments, "
        "changed defaults, ...). OLD and NEW are snapshot files written by `opwire ops snapshot NS --out FILE` "
        "(any format); without NEW, the live namespaces of OLD are compared, loaded with --import/--load-library. "
        "Exit 0 when nothing breaks under --policy, 1 when something does, 2 on bad usage.",
    )
    b.add_argument("old", help="the old snapshot file (opwire ops snapshot NS --out old.json)")
    b.add_argument("new", nargs="?", help="the new snapshot file (default: the live namespaces)")
    add_loading(b)
    b.add_argument(
        "--policy",
        default=DefaultPolicy.FROM_SCHEMA.value,
        help="default policy the files were written for: "
        + ", ".join(p.value + (" (default)" if p is DefaultPolicy.FROM_SCHEMA else "") for p in DefaultPolicy),
    )
    b.add_argument("--json", action="store_true", help="print the report as JSON")
    b.set_defaults(func=run_bc_check)

    q = verbs.add_parser(
        "policy",
        help="say whether the execution policy admits ops, after which precondition, or why it refuses them",
        description="For each overload of each OP (aten::lstm: every overload; aten::lstm.input: one), say whether "
        "`opwire run`, `exec` and `replay` admit it, which precondition is checked before its kernel runs, or why "
        "it is refused and the --allow-op that runs it anyway. Exit 0 when every overload is admitted, 1 when one "
        "is refused, 2 on bad usage (an unknown op).",
    )
    q.add_argument("ops", nargs="+", metavar="OP", help="ns::op or ns::op.overload")
    q.add_argument("--json", action="store_true", help="print the verdicts as JSON (the OpPolicyOutput record)")
    add_loading(q)
    q.set_defaults(func=run_policy)


def run_validate(args: argparse.Namespace) -> int:
    """Validate the targets; exit 1 when any finding is an error."""
    from opwire.cli.output import print_record  # deferred: imports pydantic
    from opwire.validation import (  # deferred: imports torch
        checks_run,
        format_reports,
        load_sample_inputs,
        validate_op,
        validation_output,
    )

    samples = load_sample_inputs(args.sample_inputs) if args.sample_inputs else None
    reports = [r for target in args.targets for r in validate_op(target, sample_inputs=samples)]
    errors = sum(len(r.errors) for r in reports)
    checks = list(checks_run(samples is not None))
    if args.json:
        print_record(validation_output(reports, checks))
    else:
        print(format_reports(reports, checks))
    return 1 if errors else 0


def run_snapshot(args: argparse.Namespace) -> int:
    """Write the snapshot of the namespaces."""

    from opwire.validation import snapshot_ops  # deferred: imports torch

    if args.out:
        check_output(args.out)  # before the work: a symlink or a FIFO at --out is refused first
    snapshot = snapshot_ops(args.namespaces)
    data = opwire.dumps(snapshot, format=args.format)
    if args.format == "json":  # snapshots are diffed in review: one value a line, keys sorted, a final newline
        data = (json.dumps(json.loads(data), indent=2, sort_keys=True) + "\n").encode()
    if args.out:
        write_output(args.out, data)
        n = len(snapshot.ops)
        print(
            f"wrote {args.out}: {n} op{'' if n == 1 else 's'} of {', '.join(args.namespaces)} as {args.format}, "
            f"{len(data)} bytes (compare later with: opwire ops bc-check {args.out})"
        )
    else:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    return 0


def run_bc_check(args: argparse.Namespace) -> int:
    """Compare two library versions; exit 1 when a change breaks under --policy."""
    from opwire.validation import bc_check  # deferred: imports torch

    report = bc_check(args.old, args.new, policy=args.policy)
    if args.json:
        from opwire.cli.output import print_record  # deferred: imports pydantic

        print_record(report.to_model())
    else:
        print(report)
    return 0 if report.ok else 1


def run_policy(args: argparse.Namespace) -> int:
    """Print the policy's verdict on every overload of the ops; exit 1 when one is refused."""
    from opwire.proxy_executor import explain, policy_output  # deferred: imports pydantic

    verdicts = [v for op in args.ops for v in explain(op)]
    record = policy_output(verdicts)
    if args.json:
        from opwire.cli.output import print_record  # deferred: imports pydantic

        print_record(record)
    else:
        for v in verdicts:
            print(v)
        if record.refused > 1:
            print(f"{record.refused} overloads are refused; to run them all anyway: {record.allow}")
    return 1 if record.refused else 0
