"""Write the bytecode of the torch modules the suite imports, on the core the venv bootstrap leaves idle.

Nothing is compiled at install (`pip install --no-compile`, see the Makefile): Python's own cache compiles a module
the first time a process imports it. In a fresh clone that first import is `make test`'s: pytest's controller
compiles torch while the workers wait for it, then the three workers compile Dynamo's and sympy's modules during
collection, all while lint and docs want the same two cores (~14 CPU-s of compiling, ~1,800 files).

The bootstrap's last `pip install` (everything but torch) runs on one core, mostly resolving and downloading. The
Makefile starts this script beside it, once torch is installed: it imports what every test worker imports of
torch while collecting, so that their bytecode is written before the suite starts. Only the packages installed
when it starts are imported (torch and its own requirements); everything else is refused as if absent (torch's
optional import of numpy among them), so that nothing half-written by the pip beside it is read.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import pkgutil
import sys
import sysconfig
import warnings
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

# What every test worker imports of torch while collecting (torch, export, Dynamo, and sympy through them: ~1,100
# of torch's modules, 420 of sympy's), ~9 CPU-s cold: it must end before the pip beside it does, or the bootstrap
# waits for it. Inductor's entry (networkx), the torchrun launcher and the C++ extension builder add ~5 CPU-s more
# for one or a few processes of the suite; a fresh-clone bootstrap at load ~2 then waited ~9 s for them
MODULES = ("torch", "torch.export", "torch._dynamo")


class OnlyInstalled(importlib.abc.MetaPathFinder):
    """sys.path's finder, blind to the top-level modules of site-packages outside the given set (as if absent).

    It answers for the finder it replaces, so that `importlib.util.find_spec` sees None for a refused module (torch's
    Dynamo probes optional packages that way) and an import of one raises ModuleNotFoundError. Modules outside
    site-packages (the standard library, a package's own vendored copies such as setuptools') are not refused.
    """

    def __init__(self, site_dirs: set[Path], installed: set[str], finder: type[importlib.machinery.PathFinder]) -> None:
        self.site_dirs = site_dirs
        self.installed = installed
        self.finder = finder

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        """The wrapped finder's spec, or None for a top-level module put in site-packages after the warm-up began."""
        spec = self.finder.find_spec(fullname, path, target)
        if spec is None or "." in fullname or fullname in self.installed:
            return spec
        places = spec.submodule_search_locations or ([spec.origin] if spec.origin else [])
        return None if any(Path(p).parent in self.site_dirs for p in places) else spec

    def invalidate_caches(self) -> None:
        """Forwarded to the wrapped finder."""
        self.finder.invalidate_caches()


def main() -> int:
    """Import MODULES with the interpreter's bytecode cache on, blind to what pip installs beside it."""
    sys.dont_write_bytecode = False
    site_dirs = {Path(sysconfig.get_path(key)) for key in ("purelib", "platlib")}
    installed = {m.name for m in pkgutil.iter_modules([str(d) for d in site_dirs])}
    sys.meta_path[:] = [
        OnlyInstalled(site_dirs, installed, f) if f is importlib.machinery.PathFinder else f for f in sys.meta_path
    ]
    warnings.simplefilter("ignore")  # torch warns that numpy is missing: it is refused here on purpose
    for name in MODULES:
        importlib.import_module(name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
