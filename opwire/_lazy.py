"""Lazy faces: a package's public names and modules load on first attribute access.

A face spells each lazy name twice: in its `_LAZY` table (name -> defining module, what runs) and in its
`if TYPE_CHECKING:` block as `from module import name as name` (what mypy and IDEs see; the `as` form
re-exports it under mypy's strict mode). `tests/test_lazy_faces.py` keeps the two equal for every face, and
`__all__` takes the lazy names from the table (`lazy_names`), so a face never lists them a third time.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from collections.abc import Callable, Collection, Iterable, Mapping
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


def lazy_names(names: Mapping[str, str], eager: Collection[str]) -> list[str]:
    """The names of a face's `_LAZY` table, sorted, for `__all__ += lazy_names(_LAZY, __all__)`.

    `eager` is the rest of `__all__` (names the face binds at import); a name in both is a ValueError."""
    both = sorted(set(names) & set(eager))
    if both:
        raise ValueError(f"names both lazy and bound at import: {both}; keep each in one place")
    return sorted(names)
