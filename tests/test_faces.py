"""The CLI speaks to package faces: it imports `opwire.<package>` (an `__init__`), `opwire.errors` and
`schema.models`, never a module below a face; the faces load what it asks for lazily where that imports torch.

The rule is `tools/import_contracts.below_face`, the one lint-imports checks (the `faces` contract in
pyproject.toml); this test reads every import statement, those inside functions too, and names the file, the
line and the face the name belongs on.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
OPWIRE = ROOT / "opwire"
_spec = importlib.util.spec_from_file_location("import_contracts", ROOT / "tools" / "import_contracts.py")
assert _spec is not None and _spec.loader is not None
contracts = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(contracts)

ALLOWED = ("opwire.errors", "opwire.schema.models")  # as pyproject's `faces` contract lists them
FACES = sorted(
    ".".join(p.parent.relative_to(ROOT).parts)
    for p in OPWIRE.rglob("__init__.py")
    if not any(part.startswith("_") for part in p.parent.relative_to(ROOT).parts)
)


def _is_package(module: str) -> bool:
    return (ROOT.joinpath(*module.split(".")) / "__init__.py").is_file()


def _is_module(module: str) -> bool:
    return _is_package(module) or ROOT.joinpath(*module.split(".")).with_suffix(".py").is_file()


def _imported(node: ast.Import | ast.ImportFrom) -> list[str]:
    """The opwire modules a statement imports (`from opwire.serde import json` imports `opwire.serde.json`)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if node.level or node.module is None:
        return []
    subs = [f"{node.module}.{a.name}" for a in node.names if _is_module(f"{node.module}.{a.name}")]
    return subs + ([node.module] if len(subs) < len(node.names) else [])


def below_faces(source: str, filename: str) -> list[str]:
    """One line per import of `source` (a module of opwire.cli) that lands below a face."""
    bad = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        for module in _imported(node):
            if module.split(".")[0] != "opwire" or not contracts.below_face(
                module, ["opwire.cli"], ALLOWED, _is_package
            ):
                continue
            face = contracts.face_of(module, _is_package)
            bad.append(
                f"{filename}:{node.lineno} imports {module}, below the face {face}: import the name from {face} "
                f"(export it there in `__all__`, through its `_LAZY` table if {module} imports torch)"
            )
    return bad


def test_the_cli_imports_faces_only() -> None:
    bad = [
        line
        for path in sorted((OPWIRE / "cli").glob("*.py"))
        for line in below_faces(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    ]
    assert bad == [], "the CLI imports below a package's face:\n" + "\n".join(bad)


def test_the_face_check_names_the_file_line_and_face() -> None:
    source = (
        "from opwire.errors import DecodeError\nfrom opwire.schema import models as m\nfrom opwire import program\n"
        "from opwire.cli.options import add_loading\n"
        "def f():\n    from opwire.serde import json, dumps\n    import opwire.program.signature\n"
        "    from opwire.serde._thrift import fast\n"
    )
    bad = below_faces(source, "opwire/cli/probe.py")
    assert [line.split(",")[0] for line in bad] == [
        "opwire/cli/probe.py:6 imports opwire.serde.json",
        "opwire/cli/probe.py:7 imports opwire.program.signature",
        "opwire/cli/probe.py:8 imports opwire.serde._thrift.fast",
    ]
    assert "below the face opwire.serde: import the name from opwire.serde" in bad[0]


@pytest.mark.parametrize("face", FACES)
def test_no_lazy_name_of_a_face_is_one_of_its_modules(face: str) -> None:
    """A lazy name spelled like a submodule is shadowed by that module once anything imports it: Python binds
    `package.<module>` on import, so `from face import name` would return the module, not the function. A
    module that is itself callable (`opwire.view`: calling it calls `view`) stands in for its function."""
    module = importlib.import_module(face)
    lazy = getattr(module, "_LAZY", {})
    folder = ROOT.joinpath(*face.split("."))
    clashes = sorted(
        n
        for n in lazy
        if ((folder / f"{n}.py").is_file() or (folder / n / "__init__.py").is_file())
        and not callable(importlib.import_module(f"{face}.{n}"))
    )
    assert clashes == [], f"{face}: lazy names that are also its modules: {clashes}; reach them as `module.name`"


@pytest.mark.parametrize("face", FACES)
def test_every_name_a_face_exports_resolves(face: str) -> None:
    module = importlib.import_module(face)
    missing = [n for n in getattr(module, "__all__", ()) if not hasattr(module, n)]
    assert missing == [], f"{face} lists names it cannot give: {missing}"
