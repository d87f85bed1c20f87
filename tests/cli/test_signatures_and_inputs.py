"""The CLI tells the user what to feed: `inspect` shows signatures, `run` checks inputs and prints outputs readably."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from support import corpus
from support.clirun import Cli

import opwire
from opwire.cli import main
from opwire.schema import models as m
from opwire.serde import torch_bridge


def _archive(tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name.replace('/', '_')}.opw"
    path.write_bytes(opwire.dumps(torch_bridge.archive_from_exported_program(corpus.get_program(name).ep), "compact"))
    return path


def _json(tmp_path: Path, name: str, doc: object) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return str(path)


def test_inspect_shows_the_signature_with_symbolic_dims(tmp_path: Path, cli: Cli) -> None:
    (tmp_path / "dyn.json").write_bytes(corpus.get_serialized("dynamic/training").json_bytes)
    done = cli("inspect", "dyn.json")
    assert done.returncode == 0, done.stderr
    head = done.stdout.split("nodes:")[0]
    assert head.splitlines()[4:] == [
        "inputs:",
        "  x                    float32[s77, 8] on cpu",
        "  y                    float32[s17, 8] on cpu",
        "outputs:",
        "  getitem              float32[s77, 4] on cpu",
        "ranges:",
        "  s17                  2..64",
        "  s77                  2..64",
        "parameters: 0",
        "buffers: 0",
        "constants: 0",
    ]


def test_inspect_counts_parameters_and_buffers_apart_from_user_inputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prog = corpus.get_program("conv_bn/training")
    assert main(["inspect", str(_archive(tmp_path, prog.name)), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert [p["name"] for p in summary["inputs"]] == ["x"]
    assert summary["inputs"][0] == {  # a ProgramPort record
        "name": "x",
        "kind": "Tensor",
        "dtype": "float32",
        "shape": list(prog.ep.example_inputs[0][0].shape),
        "symbolic_shape": None,
        "device": "cpu",
        "value": None,
        "constant": False,
    }
    params = [k for k, v in prog.ep.state_dict.items() if isinstance(v, torch.nn.Parameter)]
    assert summary["parameters"] == len(params) and summary["buffers"] == len(prog.ep.state_dict) - len(params)
    assert all(not op.startswith("torch.ops.") for op in summary["ops"])


@pytest.mark.parametrize(
    "inputs, message",
    [
        (
            {},
            "input 'x' is missing: the program takes x: float32[s77, 8] on cpu, y: float32[s17, 8] on cpu; got nothing",
        ),
        (
            {"x": [[1.0] * 8] * 3, "y": [[1.0] * 8] * 3, "z": 1},
            "input 'z' is not an input of the program: it takes x: float32[s77, 8] on cpu, y: float32[s17, 8] on cpu",
        ),
        (
            {"x": [[1] * 8] * 3, "y": [[1.0] * 8] * 3, "_int": True},
            "input 'x': expected float32[s77, 8] on cpu, got dtype int64[3, 8]; give the input as float32 (a Values "
            "file keeps dtypes; plain JSON numbers are read as the signature asks)",
        ),
        (
            {"x": [1.0] * 8, "y": [[1.0] * 8] * 3},
            "input 'x': expected 2 dims (float32[s77, 8] on cpu), got 1 (float32[8])",
        ),
        (
            {"x": [[1.0] * 7] * 3, "y": [[1.0] * 8] * 3},
            "input 'x': expected size 8 at dim 1 (float32[s77, 8] on cpu), got 7 (float32[3, 7])",
        ),
        (
            {"x": [[1.0] * 8] * 65, "y": [[1.0] * 8] * 3},
            "input 'x': dim 0 is 65, outside the range 2..64 of s77 (float32[s77, 8] on cpu); the program was exported "
            "for sizes in that range",
        ),
        ({"x": 3, "y": [[1.0] * 8] * 3}, "input 'x': expected a tensor float32[s77, 8] on cpu, got int 3"),
    ],
)
def test_run_checks_inputs_against_the_signature(
    tmp_path: Path, inputs: dict[str, object], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    program = tmp_path / "dyn.json"
    program.write_bytes(corpus.get_serialized("dynamic/training").json_bytes)
    if inputs.pop("_int", False):  # a Values file keeps int64 (plain JSON would take the program's dtype)
        doc = {k: torch.tensor(v) if isinstance(v, list) else v for k, v in inputs.items()}
        path = tmp_path / "in.json"
        path.write_bytes(opwire.dumps(opwire.serde.values(doc)))
    else:
        path = Path(_json(tmp_path, "in.json", inputs))
    assert main(["run", str(program), "--inputs", str(path)]) == 2
    assert capsys.readouterr().err == f"opwire run: error: {message}\n"


def test_run_takes_plain_json_and_prints_outputs_readably(tmp_path: Path, cli: Cli) -> None:
    program = _archive(tmp_path, "mlp/decomposed")
    x = [[0.5] * 8] * 5
    _json(tmp_path, "x.json", {"x": x})
    done = cli("run", program.name, "--inputs", "x.json")
    assert done.returncode == 0, done.stderr
    want = corpus.get_program("mlp/decomposed").ep.module()(torch.tensor(x))
    line = done.stdout.strip()
    assert line.startswith("output[0]: float32[5, 4] on cpu  min ")
    assert f"mean {want.mean().item():.4g}" in line and line.endswith(", ...]")


def test_run_and_exec_share_one_json_shape(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    program = _archive(tmp_path, "mlp/decomposed")
    assert main(["run", str(program), "--inputs", _json(tmp_path, "x.json", {"x": [[0.0] * 8] * 5}), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)["outputs"]["output[0]"]
    assert {k for k, v in out.items() if v is not None} == {"kind", "dtype", "shape", "device", "values", "stats"}
    assert {k for k, v in out["stats"].items() if v is not None} == {"min", "max", "mean", "std"}
    nodes = m.ExternKernelNodes(
        nodes=[
            m.ExternKernelNode(
                name="buf0",
                node=m.Node(
                    target="aten::relu",
                    inputs=[m.NamedArgument(name="self", arg=m.Argument(as_tensor=m.TensorArgument(name="a")))],
                    outputs=[m.Argument(as_tensor=m.TensorArgument(name="buf0"))],
                    metadata={},
                ),
            )
        ]
    )
    (tmp_path / "n.json").write_bytes(opwire.dumps(nodes))
    assert (
        main(["exec", str(tmp_path / "n.json"), "--inputs", _json(tmp_path, "a.json", {"a": [-1.0, 2.0]}), "--json"])
        == 0
    )
    got = json.loads(capsys.readouterr().out)["nodes"][0]
    assert got["target"] == "aten::relu.default"
    assert {k: v for k, v in got["outputs"]["buf0"].items() if v is not None} == {
        "kind": "Tensor",
        "dtype": "float32",
        "shape": [2],
        "device": "cpu",
        "values": [0.0, 2.0],
        "stats": {
            "min": 0.0,
            "max": 2.0,
            "mean": 1.0,
            "std": pytest.approx(2**0.5),
            "nonfinite": None,
            "of_first": None,
        },
    }
    assert main(["exec", str(tmp_path / "n.json"), "--inputs", _json(tmp_path, "b.json", {"b": [1.0]})]) == 2
    assert capsys.readouterr().err == (
        "opwire exec: error: input 'a' is missing: node [0] buf0 (aten::relu.default) reads it and no earlier node "
        "produces it; --inputs gives b (`opwire inspect NODES` lists every name the nodes read)\n"
    )
    assert main(["run", str(tmp_path / "n.json"), "--inputs", str(tmp_path / "a.json")]) == 2
    assert capsys.readouterr().err == (
        f"opwire run: error: {tmp_path / 'n.json'} holds AOTInductor extern nodes (ExternKernelNodes), not a program; "
        f"run it with `opwire exec {tmp_path / 'n.json'} --inputs VALUES` (`opwire inspect {tmp_path / 'n.json'}` "
        "lists the names it reads)\n"
    )


def test_torch_saved_inputs_need_allow_pickle(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    program = str(_archive(tmp_path, "mlp/decomposed"))
    saved = tmp_path / "x.pt"
    torch.save({"x": torch.randn(5, 8)}, saved)
    assert main(["run", program, "--inputs", str(saved)]) == 2
    assert capsys.readouterr().err == (
        f"opwire run: error: --inputs {saved} is a zip (a torch.save pickle); pickles run code when loaded: pass "
        '--allow-pickle for a file you trust, or give the inputs as plain JSON ({"x": [[1.0, 2.0]]})\n'
    )
    assert main(["run", program, "--inputs", str(saved), "--allow-pickle"]) == 0
    capsys.readouterr()
    torch.save({"x": [1, 2]}, saved)
    assert main(["run", program, "--inputs", str(saved), "--allow-pickle"]) == 2
    assert capsys.readouterr().err == (
        f"opwire run: error: --inputs {saved}: expected a torch.save'd dict of name -> tensor, got dict with other "
        "values\n"
    )


def test_plain_json_that_is_no_tensor(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    program = str(_archive(tmp_path, "mlp/decomposed"))
    ragged = _json(tmp_path, "r.json", {"x": [[1.0, 2.0], [3.0]]})
    assert main(["run", program, "--inputs", ragged]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        f"opwire run: error: {ragged}: input 'x' is a list that is not a rectangular array of numbers"
    )
    assert err.endswith("give a tensor as nested lists of equal length\n")
    obj = _json(tmp_path, "o.json", {"x": {"a": 1}})
    assert main(["run", program, "--inputs", obj]) == 2
    assert capsys.readouterr().err == (
        f"opwire run: error: {obj}: input 'x' is a JSON dict; expected nested lists (a tensor) or a number (or a "
        "Values file, as `opwire run --out` writes)\n"
    )


def test_an_input_spec_that_disagrees_with_the_signature(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import torch.utils._pytree as pytree

    archive = torch_bridge.archive_from_exported_program(corpus.get_program("mlp/decomposed").ep)
    two = pytree.treespec_dumps(pytree.tree_flatten(((torch.zeros(1), torch.zeros(1)), {}))[1])
    archive.program.graph_module.module_call_graph[0].signature.in_spec = two
    path = tmp_path / "p.opw"
    path.write_bytes(opwire.dumps(archive, "compact"))
    assert main(["run", str(path), "--inputs", _json(tmp_path, "x.json", {"x": [[0.0] * 8] * 5})]) == 2
    assert capsys.readouterr().err == (
        "opwire run: error: the program's input spec holds 2 values but its signature names 1 inputs (x); pass "
        "'args' and 'kwargs' in a Values file\n"
    )


class _Flagged(torch.nn.Module):
    def forward(self, x: torch.Tensor, flag: bool = False) -> torch.Tensor:
        return x + 1 if flag else x - 1


def test_constant_inputs_are_shown_filled_in_and_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ep = torch.export.export(_Flagged(), (torch.randn(2),), {"flag": True})
    path = tmp_path / "flagged.json"
    path.write_bytes(opwire.dumps(opwire.serde.from_exported_program(ep)))
    assert main(["inspect", str(path)]) == 0
    assert "  flag                 bool = True (constant: the program was exported with this value)\n" in (
        capsys.readouterr().out
    )
    assert main(["run", str(path), "--inputs", _json(tmp_path, "x.json", {"x": [0.0, 1.0]}), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["outputs"]["output[0]"]["values"] == [1.0, 2.0]
    assert main(["run", str(path), "--inputs", _json(tmp_path, "f.json", {"x": [0.0, 1.0], "flag": False})]) == 2
    assert capsys.readouterr().err == (
        "opwire run: error: input 'flag': the program was exported with the constant True, got False; leave it out "
        "or pass that value (re-export the program to use another)\n"
    )
    with pytest.raises(opwire.BindError) as info:
        opwire.run_program(opwire.serde.from_exported_program(ep), (torch.zeros(2),), {"flag": False})
    assert str(info.value) == (
        "input_specs[1]: input 'flag' was exported as the constant True, got False; pass the same value (re-export "
        "the program to use another)"
    )
