"""Every command loads the user's libraries: `--import MODULE`, `--load-library PATH.so`, and `--device` checked once.

The user's module (`shop12.py`, written beside the files) defines a custom op and a dataclass output
registered as a pytree node; the program and the trace use both, so they run only once it is imported.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
import torch
from support.clirun import Cli

import opwire
from opwire.cli import main
from opwire.serde import torch_bridge

MODULE = """
import dataclasses

import torch


@torch.library.custom_op("opwire_t12::clamp_pos", mutates_args=())
def clamp_pos(x: torch.Tensor) -> torch.Tensor:
    if bool((x < -100).any()):
        raise ValueError("inputs below -100 are not allowed")
    return x.clamp(min=0)


@clamp_pos.register_fake
def _(x):
    return torch.empty_like(x)


@dataclasses.dataclass
class Out:
    y: torch.Tensor
    total: torch.Tensor


torch.export.register_dataclass(Out, serialized_type_name="shop12.Out")


class Model(torch.nn.Module):
    def forward(self, x):
        y = torch.ops.opwire_t12.clamp_pos(x)
        return Out(y, y.sum())
"""

BROKEN = "import torch\nraise RuntimeError('needs a GPU to register its ops')\n"


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding shop12.py, a program using it (prog.opw), its inputs and a trace of the op."""
    root = tmp_path_factory.mktemp("shop")
    (root / "shop12.py").write_text(MODULE)
    (root / "broken12.py").write_text(BROKEN)
    sys.path.insert(0, str(root))
    try:
        mod = importlib.import_module("shop12")
    finally:
        sys.path.remove(str(root))
    ep = torch.export.export(mod.Model(), (torch.randn(3),))
    (root / "prog.opw").write_bytes(opwire.dumps(torch_bridge.archive_from_exported_program(ep), "compact"))
    (root / "in.json").write_text('{"x": [-1.0, 2.0, 3.0]}')
    (root / "low.json").write_text('{"x": [-200.0, 2.0, 3.0]}')
    with opwire.record(include=["opwire_t12::*"]) as trace:
        torch.ops.opwire_t12.clamp_pos(torch.tensor([-1.0, 5.0]))
    trace.save(root / "op.trace")
    return root


def test_run_names_the_unregistered_pytree_class_and_the_import(shop: Path, cli: Cli) -> None:
    done = cli("run", "prog.opw", "--inputs", "in.json", cwd=shop)
    assert done.returncode == 2
    assert done.stderr == (
        "opwire run: error: the program's out_spec names the pytree class 'shop12.Out', which no imported module "
        "has registered; import the module that defines it first (opwire run --import shop12, or `import shop12` "
        "in Python) - at `graph_module.module_call_graph[0].signature.out_spec`\n"
    )


def test_run_with_import_runs_the_custom_op(shop: Path, cli: Cli) -> None:
    done = cli("run", "prog.opw", "--inputs", "in.json", "--import", "shop12", cwd=shop)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "output[0] .y: float32[3] on cpu  min 0 max 3 mean 1.667 std 1.528  [0, 2, 3]",
        "output[1] .total: float32[] on cpu  min 5 max 5 mean 5 std 0  [5]",
    ]


def test_a_failing_kernel_exits_1(
    shop: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(shop)
    assert main(["run", "prog.opw", "--inputs", "low.json", "--import", "shop12"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("opwire run: error: ") and err.count("\n") == 1
    assert "opwire_t12::clamp_pos" in err and "ValueError: inputs below -100 are not allowed" in err


def test_replay_imports_the_library_of_the_trace(shop: Path, cli: Cli) -> None:
    done = cli("replay", "op.trace", "--import", "shop12", cwd=shop)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("replayed 1 of 1 calls (isolated)")


@pytest.mark.parametrize(
    "command",
    [
        ["inspect", "prog.opw"],
        ["convert", "prog.opw", "out.json"],
        ["exec", "nodes.json", "--inputs", "in.json"],
        ["run", "prog.opw", "--inputs", "in.json"],
        ["replay", "op.trace"],
        ["ops", "validate", "opwire_t12"],
        ["ops", "snapshot", "opwire_t12"],
    ],
)
def test_a_module_that_raises_is_reported_with_its_own_exception(
    shop: Path, command: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(shop)
    assert main([*command, "--import", "broken12"]) == 2
    assert capsys.readouterr().err == (
        f"opwire {command[0]}: error: --import broken12: the module raised RuntimeError: needs a GPU to register "
        f"its ops (at {shop / 'broken12.py'}:2)\n"
    )


def test_a_module_that_raises_through_the_cli(shop: Path, cli: Cli) -> None:
    done = cli("inspect", "prog.opw", "--import", "broken12", cwd=shop)
    assert done.returncode == 2
    assert done.stderr == (
        "opwire inspect: error: --import broken12: the module raised RuntimeError: needs a GPU to register its ops "
        f"(at {shop / 'broken12.py'}:2)\n"
    )


def test_a_missing_module_and_a_bad_library(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "libnothing.so").write_bytes(b"not a shared library")
    assert main(["inspect", "x.json", "--import", "nomod12"]) == 2
    assert capsys.readouterr().err == (
        "opwire inspect: error: --import nomod12: no module named 'nomod12'; expected a module importable from the "
        "working directory or PYTHONPATH, or a file path (--import ./lib/mylib.py)\n"
    )
    assert main(["convert", "x.json", "y.json", "--load-library", "libnothing.so"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("opwire convert: error: --load-library libnothing.so: loading failed (")
    assert err.endswith("expected a shared library built against this torch that registers ops\n")


def test_device_is_checked_up_front(shop: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(shop / "prog.opw"), "--inputs", str(shop / "in.json"), "--device", "cuda"]) == 2
    assert capsys.readouterr().err == (
        "opwire run: error: device 'cuda' is not available in this torch build (a CPU-only build)\n"
    )
    assert main(["replay", str(shop / "op.trace"), "--device", "gpu"]) == 2
    assert capsys.readouterr().err == (
        "opwire replay: error: --device 'gpu': expected a device such as cpu, cuda, cuda:1 or mps\n"
    )


@pytest.mark.slow
def test_hugging_face_model_runs_with_import(tmp_path: Path, cli: Cli) -> None:
    """A tiny GPT-2 (random weights, built from a config: no downloads) returns a CausalLMOutput pytree."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=50, n_positions=16)
    model = transformers.GPT2LMHeadModel(config).eval()
    ids = torch.randint(0, 50, (1, 5))
    ep = torch.export.export(model, (), {"input_ids": ids, "use_cache": False})
    (tmp_path / "gpt2.opw").write_bytes(opwire.dumps(torch_bridge.archive_from_exported_program(ep), "compact"))
    (tmp_path / "ids.json").write_text(f'{{"input_ids": {ids.tolist()}}}')
    cls = type(model(input_ids=ids, use_cache=False))
    done = cli("run", "gpt2.opw", "--inputs", "ids.json")
    assert done.returncode == 2
    assert f"names the pytree class '{cls.__module__}.{cls.__name__}'" in done.stderr
    assert f"(opwire run --import {cls.__module__}," in done.stderr
    done = cli("run", "gpt2.opw", "--inputs", "ids.json", "--import", cls.__module__, "--json")
    assert done.returncode == 0, done.stderr
    import json

    got = json.loads(done.stdout)["outputs"]["output[0]"]
    want = model(input_ids=ids, use_cache=False).logits
    assert got["shape"] == [1, 5, 50]
    torch.testing.assert_close(torch.tensor(got["values"]), want.reshape(-1)[:6].detach())


def test_import_accepts_a_file_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "helper13.py").write_text("NAME = 'opwire_path13'\n")
    (tmp_path / "lib" / "ops.py").write_text(  # a name that would shadow another module
        "import torch\nfrom helper13 import NAME\nlib = torch.library.Library(NAME, 'DEF')\n"
        "lib.define('twice(Tensor x) -> Tensor')\nlib.impl('twice', lambda x: x * 2, 'CPU')\n"
        "lib.impl('twice', lambda x: x * 2, 'Meta')\n"
    )
    assert main(["ops", "validate", "opwire_path13::twice", "--import", "./lib/ops.py"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("opwire_path13::twice")
    assert "ops" not in sys.modules or not hasattr(sys.modules["ops"], "lib")
    assert main(["inspect", "x.json", "--import", "./lib/missing.py"]) == 2
    assert capsys.readouterr().err == (
        "opwire inspect: error: --import ./lib/missing.py: no such file; expected a Python file (lib/myops.py) or a "
        "module name\n"
    )
    (tmp_path / "lib" / "bad.py").write_text("raise ValueError('no GPU here')\n")
    assert main(["inspect", "x.json", "--import", "lib/bad.py"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("opwire inspect: error: --import lib/bad.py: the file raised ValueError: no GPU here (at ")


def test_import_of_a_file_through_the_cli(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "myops.py").write_text(
        "import torch\nlib = torch.library.Library('opwire_path14', 'DEF')\n"
        "lib.define('twice(Tensor x) -> Tensor')\nlib.impl('twice', lambda x: x * 2, 'CPU')\n"
        "lib.impl('twice', lambda x: x * 2, 'Meta')\n"
    )
    done = cli("ops", "validate", "opwire_path14::twice", "--import", "./lib/myops.py")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("opwire_path14::twice")
