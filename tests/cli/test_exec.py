"""`opwire exec`: runs an extern-node file with a Values file; exit codes 0 / 1 / 2."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

import opwire
from opwire.cli import main
from opwire.schema import models as m
from opwire.serde.tensors import from_tensor


def _files(tmp_path: Path, other: torch.Tensor) -> tuple[str, str]:
    t = lambda n: m.Argument(as_tensor=m.TensorArgument(name=n))  # noqa: E731
    add = m.Node(
        target="aten::add.Tensor",
        inputs=[m.NamedArgument(name="self", arg=t("x")), m.NamedArgument(name="other", arg=t("y"))],
        outputs=[t("buf1")],
        metadata={},
    )
    mul = m.Node(
        target="aten::mul.Tensor",
        inputs=[m.NamedArgument(name="self", arg=t("buf1")), m.NamedArgument(name="other", arg=t("buf1"))],
        outputs=[t("buf3")],
        metadata={},
    )
    nodes = m.ExternKernelNodes(
        nodes=[m.ExternKernelNode(name="buf0", node=add), m.ExternKernelNode(name="buf2", node=mul)]
    )
    np, vp = tmp_path / "nodes.json", tmp_path / "values.json"
    np.write_bytes(opwire.dumps(nodes))
    values = m.Values(
        values={"x": m.Value(as_tensor=from_tensor(torch.ones(2, 2))), "y": m.Value(as_tensor=from_tensor(other))}
    )
    vp.write_bytes(opwire.dumps(values))
    return str(np), str(vp)


def _set(d: dict[str, Any]) -> dict[str, Any]:
    """The fields of a printed record that are set (the JSON codec writes every field, None as null)."""
    return {k: _set(v) if isinstance(v, dict) else v for k, v in d.items() if v is not None}


def test_exec_runs_nodes_in_order(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nodes, values = _files(tmp_path, torch.full((2, 2), 2.0))
    assert main(["exec", nodes, "--inputs", values, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    stats = {"min": 9.0, "max": 9.0, "mean": 9.0, "std": 0.0}
    assert report["ok"] and _set(report["nodes"][1]["outputs"]) == {
        "buf3": {
            "kind": "Tensor",
            "dtype": "float32",
            "shape": [2, 2],
            "device": "cpu",
            "values": [9.0] * 4,
            "stats": stats,
        }
    }
    assert main(["exec", nodes, "--inputs", values]) == 0
    assert capsys.readouterr().out.splitlines()[2:] == [
        "[1] buf2 aten::mul.Tensor",
        "    buf3: float32[2, 2] on cpu  min 9 max 9 mean 9 std 0  [9, 9, 9, 9]",
    ]


def test_exec_failing_call_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nodes, values = _files(tmp_path, torch.ones(5))
    assert main(["exec", nodes, "--inputs", values]) == 1
    err = capsys.readouterr().err
    assert err.startswith("opwire exec: error: extern node 0 'buf0' (aten::add.Tensor): the kernel raised RuntimeError")


def test_exec_bad_input_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nodes, values = _files(tmp_path, torch.ones(2, 2))
    Path(values).write_text('{"values": {"x": {"as_int": "abc"}}}')
    assert main(["exec", nodes, "--inputs", values]) == 2
    assert capsys.readouterr().err.startswith("opwire exec: error:")
    assert main(["exec", str(tmp_path / "missing.json"), "--inputs", values]) == 2
    bad = tmp_path / "bad_nodes.json"
    bad.write_text(
        '{"nodes": [{"name": "b", "node": {"target": "os.system", "inputs": [], "outputs": [], "metadata": {}}}]}'
    )
    Path(values).write_text('{"values": {}}')
    assert main(["exec", str(bad), "--inputs", values]) == 2
    assert "'os.system' is neither an operator" in capsys.readouterr().err
