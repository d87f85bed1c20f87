"""Layering: dependencies point one way, and light imports stay light."""

from __future__ import annotations

import subprocess
import sys

import pytest


def _modules_after(statement: str) -> set[str]:
    code = f"import sys; {statement}; print('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    return set(out.split())


@pytest.mark.parametrize("statement", ["import opwire", "import opwire.schema", "import opwire.serde"])
def test_light_imports_load_no_torch_and_no_executor(statement: str) -> None:
    loaded = _modules_after(statement)
    assert "torch" not in loaded
    assert not any(name.startswith("opwire.proxy_executor") for name in loaded)
    assert not any(name.startswith("opwire.cli") for name in loaded)


def test_schema_imports_nothing_above_it() -> None:
    loaded = _modules_after("import opwire.schema.models, opwire.schema.ops, opwire.schema.diff")
    # opwire/__init__ brings the light opwire.serde package (dumps/loads); no codec or executor module loads
    assert not any(name.startswith(("opwire.serde.", "opwire.proxy_executor", "opwire.cli")) for name in loaded)


def test_serde_submodules_load_on_attribute_access() -> None:
    loaded = _modules_after("import opwire; opwire.serde.pt2.read")
    assert "opwire.serde.pt2" in loaded


def test_public_names_resolve() -> None:
    import opwire

    for name in opwire.__all__:
        assert getattr(opwire, name) is not None, name
