"""`opwire ops validate|snapshot|bc-check`: op validation for custom-op authors.

Exit codes: 0 clean, 1 error findings (validate) or breaking changes under --policy (bc-check), 2 bad usage.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from opwire.cli._loading import add_loading_flags, load_modules
from opwire.errors import OpValidationError
from opwire.proxy_executor.policy import DefaultPolicy

__all__ = ["add_parser", "run_bc_check", "run_snapshot", "run_validate"]


def add_parser(sub: Any) -> None:
    """Register `ops` and its validate, snapshot and bc-check subcommands."""
    p = sub.add_parser("ops", help="validate custom ops, snapshot op libraries, check backward compatibility")
    verbs = p.add_subparsers(dest="ops_command", metavar="SUBCOMMAND")
    verbs.required = True

    v = verbs.add_parser(
        "validate",
        help="check ops for export, serialization, AOTInductor and vmap",
        description="Report every way an op will fail in export, serialization, AOTInductor and vmap. "
        "Exit 0 when no finding is an error, 1 when one is, 2 on bad usage.",
    )
    v.add_argument("targets", nargs="+", metavar="TARGET", help="ns::op, ns::op.overload or a namespace")
    add_loading_flags(v)
    v.add_argument("--sample-inputs", metavar="MODULE:FUNC", help="FUNC(op_name) -> (args, kwargs) pairs for opcheck")
    v.add_argument("--json", action="store_true", help="print the reports as JSON")
    v.set_defaults(func=run_validate)

    s = verbs.add_parser(
        "snapshot",
        help="write a stable snapshot of every op in some namespaces",
        description="Write an OpLibrarySnapshot (sorted, no addresses or timestamps) to stdout or --out.",
    )
    s.add_argument("namespaces", nargs="+", metavar="NS", help="namespaces to snapshot")
    add_loading_flags(s)
    s.add_argument("--format", choices=("json", "compact", "binary"), default="json", help="output format")
    s.add_argument("--out", metavar="FILE", help="write to FILE instead of stdout")
    s.set_defaults(func=run_snapshot)

    b = verbs.add_parser(
        "bc-check",
        help="classify the changes between two versions of an op library",
        description="Compare OLD with NEW (a snapshot file; default: the live namespaces of OLD, loaded with "
        "--import/--load-library). Exit 0 when nothing breaks under --policy, 1 when something does, 2 on bad usage.",
    )
    b.add_argument("old", help="the old snapshot file")
    b.add_argument("new", nargs="?", help="the new snapshot file (default: the live namespaces)")
    add_loading_flags(b)
    b.add_argument(
        "--policy",
        default=DefaultPolicy.FROM_SCHEMA.value,
        help="default policy the files were written for: "
        + ", ".join(p.value + (" (default)" if p is DefaultPolicy.FROM_SCHEMA else "") for p in DefaultPolicy),
    )
    b.add_argument("--json", action="store_true", help="print the report as JSON")
    b.set_defaults(func=run_bc_check)


def _print_report(report: Any) -> None:
    print(report.op)
    if report.schema is not None:
        print(f"  schema: {report.schema.schema_str}")
    kernels = [f"{k.key}{'' if k.registered else '(computed)'}" for k in report.kernels if k.registered or k.runnable]
    print(f"  kernels: {' '.join(kernels) or 'none'}")
    if report.schema is not None:
        print(f"  fake impl: {report.fake_impl or 'none'}")
    if report.vmap_route is not None:
        print(f"  vmap: {report.vmap_route.route} ({report.vmap_route.detail})")
    for f in report.findings:
        print(f"  {f.severity.value} {f.code}: {f.message}")
        print(f"    fix: {f.fix}")


def run_validate(args: argparse.Namespace) -> int:
    """Validate the targets; exit 1 when any finding is an error."""
    from opwire.validation.opcheck import load_sample_inputs
    from opwire.validation.validate import validate_op

    load_modules(args, OpValidationError)
    samples = load_sample_inputs(args.sample_inputs) if args.sample_inputs else None
    reports = [r for target in args.targets for r in validate_op(target, sample_inputs=samples)]
    errors = sum(len(r.errors) for r in reports)
    if args.json:
        print(json.dumps({"errors": errors, "reports": [r.to_json() for r in reports]}, indent=2))
    else:
        for r in reports:
            _print_report(r)
        warnings = sum(1 for r in reports for f in r.findings if f.severity.value == "warning")
        print(f"{len(reports)} op(s): {errors} error(s), {warnings} warning(s)")
    return 1 if errors else 0


def run_snapshot(args: argparse.Namespace) -> int:
    """Write the snapshot of the namespaces."""
    from pathlib import Path

    import opwire
    from opwire.validation.snapshot import snapshot_ops

    load_modules(args, OpValidationError)
    data = opwire.dumps(snapshot_ops(args.namespaces), format=args.format)
    if args.out:
        Path(args.out).write_bytes(data)
    else:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    return 0


def run_bc_check(args: argparse.Namespace) -> int:
    """Compare two library versions; exit 1 when a change breaks under --policy."""
    from opwire.validation.bccheck import bc_check

    load_modules(args, OpValidationError)
    report = bc_check(args.old, args.new, policy=args.policy)
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        for c in report.changes:
            print(f"{c.severity(report.policy).value} {c.code}: {c.message}")
            effects = ", ".join(f"{k}: {v.value}" for k, v in c.effects.items())
            print(f"    callers: {c.callers.value}; files under {effects}")
            print(f"    fix: {c.fix}")
        print(f"{len(report.changes)} change(s), {len(report.breaking)} breaking under {report.policy.name}")
    return 0 if report.ok else 1
