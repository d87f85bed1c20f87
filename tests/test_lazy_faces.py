"""A face's lazy names: what runs (`_LAZY`) and what mypy sees (the `TYPE_CHECKING` block) name the same objects.

Each lazy name is spelled in `_LAZY` (name -> the module defining it, imported on first access) and as
`from module import name as name` under `if TYPE_CHECKING:` (the `as` form re-exports it for mypy's strict
mode); `__all__` takes the lazy names from `_LAZY` through `opwire._lazy.lazy_names`. A name added to one and
not the other, or pointing at another module, fails here, so mypy's view and the runtime's cannot drift.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from opwire._lazy import lazy_names

ROOT = Path(__file__).resolve().parent.parent
FACES = sorted(
    p
    for p in (ROOT / "opwire").rglob("__init__.py")
    if any(
        isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "_LAZY" for t in n.targets)
        for n in ast.parse(p.read_text("utf-8")).body
    )
)


def _face(path: Path) -> str:
    return ".".join(path.parent.relative_to(ROOT).parts)


def tables(source: str) -> tuple[dict[str, str], dict[str, str], list[str]]:
    """(`_LAZY` as written, the TYPE_CHECKING re-exports (`name as name`) as name -> module, problems).

    Other TYPE_CHECKING imports (`models as m`, `torch`) name things for annotations and are not exported; one
    that spells a lazy name without `as` is a problem: mypy would not see the face export it."""
    lazy: dict[str, str] = {}
    typed: dict[str, str] = {}
    problems: list[str] = []
    plain: list[tuple[int, str, str, str | None]] = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "_LAZY" for t in node.targets):
            lazy = ast.literal_eval(node.value)
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for imp in node.body:
                if not isinstance(imp, ast.ImportFrom) or not (imp.module or "").startswith("opwire"):
                    continue
                for alias in imp.names:
                    if alias.asname != alias.name:  # not re-exported: a name for annotations only
                        plain.append((imp.lineno, imp.module or "", alias.name, alias.asname))
                    elif alias.name in typed:
                        problems.append(f"line {imp.lineno}: {alias.name} imported twice")
                    else:
                        typed[alias.name] = imp.module or ""
    problems += [
        f"line {line}: `from {module} import {name}` - write `{name} as {name}` so that mypy sees it exported"
        for line, module, name, asname in plain
        if asname is None and name in lazy
    ]
    return lazy, typed, problems


@pytest.mark.parametrize("path", FACES, ids=_face)
def test_the_type_checking_imports_and_the_lazy_table_agree(path: Path) -> None:
    lazy, typed, problems = tables(path.read_text("utf-8"))
    assert problems == [], f"{_face(path)}: " + "; ".join(problems)
    only_runtime = {n: m for n, m in lazy.items() if typed.get(n) != m}
    only_typed = {n: m for n, m in typed.items() if lazy.get(n) != m}
    assert (only_runtime, only_typed) == ({}, {}), (
        f"{_face(path)}: _LAZY and the TYPE_CHECKING block differ: in _LAZY only (or another module there): "
        f"{only_runtime}; under TYPE_CHECKING only: {only_typed}"
    )


@pytest.mark.parametrize("path", FACES, ids=_face)
def test_all_takes_the_lazy_names_from_the_table(path: Path) -> None:
    face = importlib.import_module(_face(path))
    lazy, _, _ = tables(path.read_text("utf-8"))
    assert set(lazy) <= set(face.__all__)
    assert len(face.__all__) == len(set(face.__all__)), f"{_face(path)}: a name listed twice in __all__"
    assert "__all__ += lazy_names(_LAZY, __all__)" in path.read_text("utf-8") or (
        "__all__ = lazy_names(_LAZY, ())" in path.read_text("utf-8")
    ), f"{_face(path)}: take the lazy names into __all__ with opwire._lazy.lazy_names, not by spelling them again"


def test_the_check_sees_a_missing_a_moved_and_a_bare_name() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "_LAZY = {'f': 'opwire.a', 'g': 'opwire.b', 'h': 'opwire.c'}\n"
        "if TYPE_CHECKING:\n"
        "    import torch\n"
        "    from opwire.a import f as f\n"
        "    from opwire.x import g as g\n"
        "    from opwire.c import h\n"
        "    from opwire.schema import models as m\n"
    )
    lazy, typed, problems = tables(source)
    assert typed == {"f": "opwire.a", "g": "opwire.x"}
    assert problems == ["line 7: `from opwire.c import h` - write `h as h` so that mypy sees it exported"]
    assert {n for n in lazy if typed.get(n) != lazy[n]} == {"g", "h"}


def test_a_name_both_lazy_and_bound_at_import_is_refused() -> None:
    assert lazy_names({"b": "m", "a": "m"}, ["c"]) == ["a", "b"]
    with pytest.raises(ValueError, match=r"names both lazy and bound at import: \['a'\]"):
        lazy_names({"a": "m"}, ["a", "c"])
