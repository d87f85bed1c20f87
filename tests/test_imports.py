"""Light imports stay light: what loads at run time (the import-linter contracts in pyproject.toml, run
by `make lint`, check the static layering; these check the lazy loading that keeps `import opwire` cheap)."""

from __future__ import annotations

import subprocess
import sys

import pytest

_HEAVY = ("opwire.proxy_executor", "opwire.recording", "opwire.validation", "opwire.view", "opwire.cli")


def _modules_after(statement: str) -> set[str]:
    code = f"import sys; {statement}; print('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    return set(out.split())


@pytest.mark.parametrize(
    "statement", ["import opwire", "import opwire.schema", "import opwire.serde", "import opwire; opwire.open"]
)
def test_light_imports_load_no_torch_and_no_executor(statement: str) -> None:
    loaded = _modules_after(statement)
    assert "torch" not in loaded
    assert not any(name.startswith(_HEAVY) for name in loaded)


def test_schema_loads_no_codec() -> None:
    loaded = _modules_after("import opwire.schema.models, opwire.schema.ops, opwire.schema.diff")
    # opwire/__init__ brings the light opwire.serde package (dumps/loads); no codec module loads
    assert not any(name.startswith(("opwire.serde.", *_HEAVY)) for name in loaded)


def test_serde_submodules_load_on_attribute_access() -> None:
    loaded = _modules_after("import opwire; opwire.serde.pt2.read")
    assert "opwire.serde.pt2" in loaded


@pytest.mark.parametrize("name", ["record", "replay", "validate_op", "run_program", "bc_check"])
def test_lazy_name_loads_its_package(name: str) -> None:
    loaded = _modules_after(f"import opwire; opwire.{name}")
    assert any(m.startswith(("opwire.recording", "opwire.validation", "opwire.proxy_executor")) for m in loaded)


def test_public_names_resolve() -> None:
    import opwire

    for name in opwire.__all__:
        assert getattr(opwire, name) is not None, name


def test_proxy_executor_exports_only_public_names() -> None:
    import opwire.proxy_executor as pe

    assert all(not n.startswith("_") for n in pe.__all__)
    assert {"ProxyExecutor", "DefaultPolicy", "BindError", "KernelError", "UnknownTargetError"} <= set(pe.__all__)
    assert "BindContext" not in pe.__all__ and "NodePlan" not in pe.__all__


def _documented_modules() -> list[str]:
    import re
    from pathlib import Path

    docs = Path(__file__).resolve().parent.parent / "docs" / "reference"
    found = {m for p in docs.glob("*.md") for m in re.findall(r"^::: (opwire(?:\.\w+)+)", p.read_text(), re.M)}
    return sorted(found)


def test_every_documented_module_is_reachable_from_its_package() -> None:
    """`import opwire.serde; opwire.serde.signature` works as the reference pages spell it (lazy lists are derived)."""
    dotted = _documented_modules()
    assert "opwire.serde.signature" in dotted or "opwire.program.signature" in dotted
    code = "import importlib\nbad = []\n"
    for name in dotted:
        parent, _, leaf = name.rpartition(".")
        code += f"if not hasattr(importlib.import_module({parent!r}), {leaf!r}): bad.append({name!r})\n"
    code += "print(' '.join(bad))"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.split() == []
