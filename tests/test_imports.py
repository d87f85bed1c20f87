"""Light imports stay light: what loads at run time (the import-linter contracts in pyproject.toml, run
by `make lint`, check the static layering; these check the lazy loading that keeps `import opwire` cheap)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.xdist_group("imports")  # one worker builds the lazily_loaded fixture

_HEAVY = ("opwire.proxy_executor", "opwire.recording", "opwire.validation", "opwire.view", "opwire.cli")


_FORKED = """
import json, os, sys
{preload}
found = {{}}
for key, statement in json.loads(sys.argv[1]).items():
    r, w = os.pipe()
    if os.fork() == 0:
        os.close(r)
        exec(statement, {{}})
        with os.fdopen(w, "w") as f:
            f.write("\\n".join(sorted(sys.modules)))
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        found[key] = f.read().split()
    _, status = os.wait()
    assert status == 0, (key, status)
print(json.dumps(found))
"""


def _modules_after_each(statements: dict[str, str], preload: str) -> dict[str, set[str]]:
    """sys.modules after each statement, each in a fork of one fresh process that ran `preload` first."""
    code = _FORKED.format(preload=preload)
    out = subprocess.run(
        [sys.executable, "-c", code, json.dumps(statements)], check=True, capture_output=True, text=True
    )
    return {key: set(names) for key, names in json.loads(out.stdout).items()}


def _modules_after(statement: str) -> set[str]:
    """sys.modules after `statement` in a fresh process (forked, as `_modules_after_each` runs it, from nothing)."""
    return _modules_after_each({"": statement}, preload="")[""]


@pytest.mark.parametrize(
    "statement", ["import opwire", "import opwire.schema", "import opwire.serde", "import opwire; opwire.open"]
)
def test_light_imports_load_no_torch_and_no_executor(statement: str) -> None:
    loaded = _modules_after(statement)
    assert "torch" not in loaded
    assert not any(name.startswith(_HEAVY) for name in loaded)


def test_the_face_and_the_command_line_load_no_pydantic() -> None:
    """`opwire --help` and `--version` import the face and the CLI package only: pydantic loads with a codec."""
    loaded = _modules_after("import opwire, opwire.cli; opwire.cli.build_parser(only='')")
    assert not any(name.split(".")[0] in ("pydantic", "torch") for name in loaded)
    assert not any(name.startswith(("opwire.schema", "opwire.serde.")) for name in loaded)


def test_schema_loads_no_codec() -> None:
    loaded = _modules_after("import opwire.schema.models, opwire.schema.ops, opwire.schema.diff")
    # opwire/__init__ brings the light opwire.serde package (dumps/loads); no codec module loads
    assert not any(name.startswith(("opwire.serde.", *_HEAVY)) for name in loaded)


_LAZY = ["record", "replay", "validate_op", "run_program", "bc_check"]


@pytest.fixture(scope="module")
def lazily_loaded() -> dict[str, set[str]]:
    """sys.modules after each lazy access, each from a fresh `import opwire` (torch, which they all load, preloaded)."""
    statements = {name: f"import opwire; opwire.{name}" for name in _LAZY}
    statements["serde.pt2"] = "import opwire; opwire.serde.pt2.read"
    return _modules_after_each(statements, preload="import torch")


def test_serde_submodules_load_on_attribute_access(lazily_loaded: dict[str, set[str]]) -> None:
    assert "opwire.serde.pt2" in lazily_loaded["serde.pt2"]


@pytest.mark.parametrize("name", _LAZY)
def test_lazy_name_loads_its_package(name: str, lazily_loaded: dict[str, set[str]]) -> None:
    loaded = lazily_loaded[name]
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
    """`import opwire.program; opwire.program.signature` works as the reference pages spell it (lazy lists are derived)."""
    dotted = _documented_modules()
    assert "opwire.program.signature" in dotted
    code = "import importlib\nbad = []\n"
    for name in dotted:
        parent, _, leaf = name.rpartition(".")
        code += f"if not hasattr(importlib.import_module({parent!r}), {leaf!r}): bad.append({name!r})\n"
    code += "print(' '.join(bad))"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.split() == []
