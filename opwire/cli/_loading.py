"""Flags several subcommands share: `--import`/`--load-library` (what registers ops and pytree types) and
the decoding budgets (`--max-elements`)."""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import TYPE_CHECKING

from opwire.errors import DecodeError, OpwireError, first_line
from opwire.serde import budgets

if TYPE_CHECKING:
    from opwire.schema import models as m

__all__ = ["add_budget_flags", "add_loading_flags", "load_modules", "read_values"]


def add_loading_flags(p: argparse.ArgumentParser) -> None:
    """`--import MODULE` and `--load-library PATH.so`, both repeatable."""
    p.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help="import a Python module that registers ops or pytree types (repeatable)",
    )
    p.add_argument(
        "--load-library",
        dest="libraries",
        action="append",
        default=[],
        metavar="PATH.so",
        help="load a compiled op library with torch.ops.load_library (repeatable)",
    )


def load_modules(args: argparse.Namespace, error: type[OpwireError] = OpwireError) -> None:
    """Import the modules and load the libraries named by the flags (the user's code: trusted)."""
    import torch

    if "" not in sys.path:
        sys.path.insert(0, "")  # like `python -m`: modules in the working directory import
    for name in args.imports:
        try:
            importlib.import_module(name)
        except Exception as exc:
            raise error(
                f"--import {name}: importing the module failed ({type(exc).__name__}: {exc}); "
                "expected an importable module that registers ops (check PYTHONPATH)"
            ) from None
    for path in args.libraries:
        try:
            torch.ops.load_library(path)  # type: ignore[no-untyped-call]
        except (OSError, RuntimeError) as exc:
            raise error(
                f"--load-library {path}: loading failed ({first_line(exc)}); expected a shared library built against "
                "this torch that registers ops"
            ) from None


def add_budget_flags(p: argparse.ArgumentParser) -> None:
    """`--max-elements N`: the decoded-elements budget per input (opwire.serde.budgets.MAX_ELEMENTS)."""
    p.add_argument(
        "--max-elements",
        type=int,
        default=budgets.MAX_ELEMENTS,
        metavar="N",
        help=f"decode at most N containers per input file (default {budgets.MAX_ELEMENTS}; raise for trusted input)",
    )


def read_values(path: str, fmt: str | None, max_elements: int) -> m.Values:
    """The Values file of --inputs (format from its header when `fmt` is None, else JSON), within the budgets.

    The first bytes decide: a file that is neither JSON nor opwire's Thrift form (`/dev/zero`) is refused
    before the rest is read."""
    import opwire
    from opwire.schema import models as m
    from opwire.serde import framing
    from opwire.serde.files import read_head, read_input

    try:
        head = read_head(path)
        if fmt is None:
            fmt = None if framing.has_header(head) else "json"
        if fmt == "json" and head.lstrip()[:1] != b"{":
            raise DecodeError(
                f"{path}: not a Values JSON object (it starts with {head[:8]!r}) nor a file opwire wrote in Thrift "
                "form; pass --inputs-format binary|compact for raw Thrift"
            )
        data = read_input(path, what="--inputs file")
    except OSError as exc:
        raise DecodeError(f"cannot read --inputs {path}: {exc.strerror or exc}") from None
    if fmt is None:
        fmt = framing.read_header(data, path).codec
    return opwire.loads(data, m.Values, format=fmt, max_elements=max_elements)  # type: ignore[arg-type]
