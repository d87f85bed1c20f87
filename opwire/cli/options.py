"""Options every command shares: loading the user's op libraries (`--import`, `--load-library`) and `--device`.

A command calls `add_loading(parser)` (and `add_device(parser)` if it runs on a device) in its
`add_parser`; `opwire.cli.main` then calls `prepare(args)` once, before the command runs, so every
command imports, loads and validates the same way and reports failures in the same words.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import importlib.util
import os
import re
import sys
import traceback
from pathlib import Path
from typing import Any

from opwire.errors import OpwireError, describe_exception, first_line
from opwire.serde import MAX_ELEMENTS

__all__ = [
    "LOADING_HELP",
    "add_budget_flags",
    "add_device",
    "add_loading",
    "check_device",
    "import_module",
    "prepare",
]

LOADING_HELP = (
    "Custom ops and pytree classes are registered by the user's code: --import MODULE imports a Python module "
    "(from the working directory or PYTHONPATH) or a file (--import ./lib/myops.py), and --load-library PATH.so "
    "loads a compiled op library (torch.ops.load_library) before the command reads its files."
)


def add_loading(p: argparse.ArgumentParser) -> None:
    """Add `--import MODULE` and `--load-library PATH.so` (both repeatable) to a command."""
    p.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE|FILE.py",
        help="import a Python module or file that registers ops or pytree classes first (repeatable)",
    )
    p.add_argument(
        "--load-library",
        dest="libraries",
        action="append",
        default=[],
        metavar="PATH.so",
        help="load a compiled op library with torch.ops.load_library first (repeatable)",
    )


def add_device(p: argparse.ArgumentParser, what: str) -> None:
    """Add `--device D`, checked once up front by `prepare`."""
    p.add_argument("--device", default=None, help=f"{what} on this device (cpu, cuda, cuda:1, ...); default: as stored")


def _is_path(name: str) -> bool:
    return name.endswith(".py") or "/" in name or (os.sep != "/" and os.sep in name)


def _import_file(name: str, option: str) -> Any:
    """Run the Python file `name` as a module, like `python lib/myops.py` would find its siblings.

    It is registered under a name derived from its absolute path (`opwire_import_<stem>_<hash>`), so a file
    called `ops.py` or `torch.py` shadows nothing in sys.modules.
    """
    path = Path(name)
    if not path.exists():
        raise OpwireError(f"{option} {name}: no such file; expected a Python file (lib/myops.py) or a module name")
    if not path.is_file() or path.suffix != ".py":
        raise OpwireError(f"{option} {name}: not a .py file; expected a Python file (lib/myops.py) or a module name")
    resolved = path.resolve()
    digest = hashlib.sha256(str(resolved).encode()).hexdigest()[:12]
    module_name = f"opwire_import_{re.sub(r'[^0-9A-Za-z_]', '_', resolved.stem)}_{digest}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, resolved)
    if spec is None or spec.loader is None:
        raise OpwireError(f"{option} {name}: Python cannot load this file as a module")
    module = importlib.util.module_from_spec(spec)
    if str(resolved.parent) not in sys.path:
        sys.path.insert(0, str(resolved.parent))  # its sibling modules import as they would under `python FILE`
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:
        del sys.modules[module_name]
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise OpwireError(f"{option} {name}: the file raised {describe_exception(exc)}{_where(exc)}") from None
    return module


def import_module(name: str, option: str = "--import") -> Any:
    """Import a module `name` like `python -m` would (working directory first), or a file path such as
    `lib/myops.py`; one-line OpwireError when it fails."""
    if _is_path(name):
        return _import_file(name, option)
    if "" not in sys.path:
        sys.path.insert(0, "")
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (name == exc.name or name.startswith(exc.name + ".")):
            raise OpwireError(
                f"{option} {name}: no module named {exc.name!r}; expected a module importable from the working "
                "directory or PYTHONPATH, or a file path (--import ./lib/mylib.py)"
            ) from None
        raise OpwireError(f"{option} {name}: the module raised {describe_exception(exc)}{_where(exc)}") from None
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise OpwireError(f"{option} {name}: the module raised {describe_exception(exc)}{_where(exc)}") from None


def _where(exc: BaseException) -> str:
    """` (at file.py:12)`: the innermost frame of the user's code that raised, if any."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "importlib" not in f.filename]
    return f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""


def _load_library(path: str) -> None:
    import torch

    try:
        torch.ops.load_library(path)  # type: ignore[no-untyped-call]
    except (OSError, RuntimeError) as exc:
        raise OpwireError(
            f"--load-library {path}: loading failed ({first_line(exc)}); expected a shared library built against "
            "this torch that registers ops"
        ) from None


def check_device(device: str) -> None:
    """An OpwireError unless `device` names a device this torch build can use."""
    import torch

    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise OpwireError(f"--device {device!r}: expected a device such as cpu, cuda, cuda:1 or mps") from None
    if dev.type in ("cpu", "meta"):
        return
    backend = getattr(torch, dev.type, None)
    available = getattr(backend, "is_available", None)
    if not callable(available) or not available():
        if dev.type == "cuda" and torch.version.cuda is None:
            raise OpwireError(f"device {device!r} is not available in this torch build (a CPU-only build)")
        raise OpwireError(f"device {device!r} is not available in this torch build or on this machine")
    count = getattr(backend, "device_count", None)
    if dev.index is not None and callable(count) and dev.index >= count():
        raise OpwireError(f"device {device!r} is not available: this machine has {count()} {dev.type} device(s)")


def prepare(args: argparse.Namespace) -> None:
    """Before a command runs: import its `--import` modules, load its `--load-library` files, check `--device`."""
    for name in getattr(args, "imports", None) or ():
        import_module(name)
    for path in getattr(args, "libraries", None) or ():
        _load_library(path)
    device = getattr(args, "device", None)
    if device is not None:
        check_device(device)


def add_budget_flags(p: argparse.ArgumentParser) -> None:
    """`--max-elements N`: the decoded-values budget per input (opwire.serde.budgets.MAX_ELEMENTS)."""
    p.add_argument(
        "--max-elements",
        type=int,
        default=MAX_ELEMENTS,
        metavar="N",
        help=f"decode at most N values (containers and leaves) per input (default {MAX_ELEMENTS}; raise if trusted)",
    )
