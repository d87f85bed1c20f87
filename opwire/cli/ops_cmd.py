"""`opwire ops validate|snapshot|bc-check`: op validation for custom-op authors.

Exit codes: 0 clean, 1 error findings (validate) or breaking changes under --policy (bc-check), 2 bad usage.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from typing import Any

from opwire.errors import OpValidationError, first_line
from opwire.proxy_executor.policy import DefaultPolicy

__all__ = ["add_parser", "run_bc_check", "run_snapshot", "run_validate"]


def _loading(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help="import a Python module that registers ops (repeatable)",
    )
    p.add_argument(
        "--load-library",
        dest="libraries",
        action="append",
        default=[],
        metavar="PATH.so",
        help="load a compiled op library with torch.ops.load_library (repeatable)",
    )


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
    _loading(v)
    v.add_argument("--sample-inputs", metavar="MODULE:FUNC", help="FUNC(op_name) -> (args, kwargs) pairs for opcheck")
    v.add_argument("--json", action="store_true", help="print the reports as JSON")
    v.set_defaults(func=run_validate)

    s = verbs.add_parser(
        "snapshot",
        help="write a stable snapshot of every op in some namespaces",
        description="Write an OpLibrarySnapshot (sorted, no addresses or timestamps) to stdout or --out.",
    )
    s.add_argument("namespaces", nargs="+", metavar="NS", help="namespaces to snapshot")
    _loading(s)
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
    _loading(b)
    b.add_argument(
        "--policy",
        default=DefaultPolicy.FROM_SCHEMA.value,
        help="default policy the files were written for: "
        + ", ".join(p.value + (" (default)" if p is DefaultPolicy.FROM_SCHEMA else "") for p in DefaultPolicy),
    )
    b.add_argument("--json", action="store_true", help="print the report as JSON")
    b.set_defaults(func=run_bc_check)


def _load(args: argparse.Namespace) -> None:
    """Import the modules and load the libraries that register the ops."""
    import torch

    if "" not in sys.path:
        sys.path.insert(0, "")  # like `python -m`: modules in the working directory import
    for name in args.imports:
        try:
            importlib.import_module(name)
        except Exception as exc:
            raise OpValidationError(
                f"--import {name}: importing the module failed ({type(exc).__name__}: {exc}); "
                "expected an importable module that registers ops (check PYTHONPATH)"
            ) from None
    for path in args.libraries:
        try:
            torch.ops.load_library(path)  # type: ignore[no-untyped-call]
        except (OSError, RuntimeError) as exc:
            raise OpValidationError(
                f"--load-library {path}: loading failed ({first_line(exc)}); expected a shared library built against "
                "this torch that registers ops"
            ) from None


def run_validate(args: argparse.Namespace) -> int:
    """Validate the targets; exit 1 when any finding is an error."""
    from opwire.validation.opcheck import load_sample_inputs
    from opwire.validation.validate import format_reports, validate_op

    _load(args)
    samples = load_sample_inputs(args.sample_inputs) if args.sample_inputs else None
    reports = [r for target in args.targets for r in validate_op(target, sample_inputs=samples)]
    errors = sum(len(r.errors) for r in reports)
    if args.json:
        print(json.dumps({"errors": errors, "reports": [r.to_json() for r in reports]}, indent=2))
    else:
        print(format_reports(reports))
    return 1 if errors else 0


def run_snapshot(args: argparse.Namespace) -> int:
    """Write the snapshot of the namespaces."""
    from pathlib import Path

    import opwire
    from opwire.validation.snapshot import snapshot_ops

    _load(args)
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

    _load(args)
    report = bc_check(args.old, args.new, policy=args.policy)
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        print(report)
    return 0 if report.ok else 1
