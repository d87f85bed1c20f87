"""Write the bytecode of the torch modules the suite imports, on the core the venv bootstrap leaves idle.

Nothing is compiled at install (`pip install --no-compile`, see the Makefile): Python's own cache compiles a module
the first time a process imports it. In a fresh clone that first import is `make test`'s: pytest's controller
compiles torch while the workers wait for it, then the three workers compile Dynamo, sympy and Inductor's modules
during collection, all while lint and docs want the same two cores (~12 CPU-s of compiling, ~2,000 files).

The bootstrap's last `pip install` (everything but torch) runs on one core, mostly resolving and downloading. The
Makefile starts this script beside it, once torch is installed: it imports what the suite's processes import of
torch, so that their bytecode is written before the suite starts. Only the packages installed when it starts are
imported (torch and its own requirements); everything else is refused as if absent (torch's optional imports of
numpy and tqdm among them), so that nothing half-written by the pip beside it is read.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import pkgutil
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType

# What the suite's processes import of torch: the workers' collection (torch, Dynamo, export and sympy through
# them), the export corpus and Inductor's entry (networkx), the torchrun launches (torch.distributed.run, elastic)
# and the C++ op build of the validation tests
MODULES = (
    "torch",
    "torch.export",
    "torch._dynamo",
    "torch._inductor.compile_fx",
    "torch.distributed.run",
    "torch.utils.cpp_extension",
)


class OnlyInstalled(importlib.abc.MetaPathFinder):
    """Refuses every top-level module that is not in the given set (as if it were not installed)."""

    def __init__(self, installed: set[str]) -> None:
        self.installed = installed

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        """Raise ModuleNotFoundError for a top-level module installed after the warm-up began; else defer."""
        top = fullname.partition(".")[0]
        if top not in self.installed:
            raise ModuleNotFoundError(f"warm_bytecode: {top} was not installed when the warm-up began", name=fullname)
        return None


def installed_now() -> set[str]:
    """The top-level modules importable at this moment: the standard library, builtins and what sys.path holds."""
    return {m.name for m in pkgutil.iter_modules()} | set(sys.builtin_module_names) | set(sys.stdlib_module_names)


def main() -> int:
    """Import MODULES with the interpreter's bytecode cache on; the refusals of absent modules are torch's concern."""
    sys.dont_write_bytecode = False
    sys.meta_path.insert(0, OnlyInstalled(installed_now()))
    warnings.simplefilter("ignore")  # torch warns that numpy is missing: it is refused here on purpose
    for name in MODULES:
        importlib.import_module(name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
