"""Lazy submodules: a package's public modules load on first attribute access, read from its folder."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from collections.abc import Callable, Iterable, Mapping
from types import ModuleType
from typing import Any


def public_submodules(path: Iterable[str]) -> frozenset[str]:
    """The modules in a package folder whose names have no leading underscore."""
    return frozenset(info.name for info in pkgutil.iter_modules(list(path)) if not info.name.startswith("_"))


def submodule_getattr(package: str, path: Iterable[str]) -> Callable[[str], ModuleType]:
    """A module `__getattr__` that imports `package.<name>` for each public submodule on first access."""
    names = public_submodules(path)

    def __getattr__(name: str) -> Any:
        if name in names:
            return importlib.import_module(f"{package}.{name}")
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__


def lazy_getattr(package: str, path: Iterable[str], names: Mapping[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` that imports each of `names` (public name -> module defining it) on first access,
    caching it in the package, and the package's public submodules as `submodule_getattr` does."""
    submodule = submodule_getattr(package, path)

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            return submodule(name)
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
