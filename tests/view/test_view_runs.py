"""`opwire run --save-nodes` / `--compare-nodes --findings`: per-node comparison of two runs, first divergence."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
from support import corpus

import opwire
from opwire.cli import main
from opwire.proxy_executor.runner import ProgramRunner
from opwire.schema import models as m
from opwire.serde import objects, tensors, torch_bridge
from opwire.validation import CODES
from opwire.view.runs import NodeComparer, NodeRecorder, read_nodes


def _files(tmp_path: Path, name: str = "mlp/decomposed", perturb: str | None = None) -> tuple[str, str]:
    """An archive of a corpus program (one weight shifted by 0.5 when `perturb` names it) and its inputs."""
    prog = corpus.get_program(name)
    archive = torch_bridge.archive_from_exported_program(prog.ep)
    if perturb is not None:
        w = dict(archive.weights)
        w[perturb] = tensors.from_tensor(tensors.to_tensor(w[perturb]) + 0.5)
        archive = archive.model_copy(update={"weights": w})
    path = tmp_path / f"prog{'-' + perturb if perturb else ''}.opw"
    path.write_bytes(opwire.dumps(archive, "compact"))
    inputs = tmp_path / "x.json"
    values = {"args": objects.from_python(list(prog.args)), "kwargs": objects.from_python(prog.kwargs)}
    inputs.write_bytes(opwire.dumps(m.Values(values=values)))
    return str(path), str(inputs)


def test_same_run_matches_everywhere(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prog, x = _files(tmp_path)
    nodes, findings = tmp_path / "a.nodes", tmp_path / "f.json"
    assert main(["run", prog, "--inputs", x, "--save-nodes", str(nodes)]) == 0
    assert "saved 9 node outputs" in capsys.readouterr().err
    assert main(["run", prog, "--inputs", x, "--compare-nodes", str(nodes), "--findings", str(findings)]) == 0
    doc = json.loads(findings.read_text())
    assert doc["opwire_findings"] == 2 and doc["first_divergence"] is None
    assert {f["severity"] for f in doc["findings"]} == {"ok"} and {f["code"] for f in doc["findings"]} == {"node_match"}
    assert opwire.loads(findings.read_bytes(), m.FindingsDocument).findings[0].fix == "nothing to do"
    assert "compared 9 nodes: 0 differ" in capsys.readouterr().err


def test_injected_mismatch_is_the_first_divergence(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prog, x = _files(tmp_path)
    bad, _ = _files(tmp_path, perturb="net.2.weight")  # the second Linear: permute_1 reads it first
    nodes, findings = tmp_path / "a.nodes", tmp_path / "f.json"
    assert main(["run", prog, "--inputs", x, "--save-nodes", str(nodes)]) == 0
    assert main(["run", bad, "--inputs", x, "--compare-nodes", str(nodes), "--findings", str(findings)]) == 1
    doc = json.loads(findings.read_text())
    status = {f["node"]: f["severity"] for f in doc["findings"]}
    assert doc["first_divergence"] == "permute_1"
    assert [n for n, s in status.items() if s == "ok"] == ["permute", "addmm", "relu", "permute_2"]
    assert status["permute_1"] == status["addmm_1"] == "error"
    # permute_1 reads only the (unsaved) weight: the difference starts there; addmm_1 received permute_1's output
    origins = {f["node"]: f["origin"] for f in doc["findings"] if f.get("origin")}
    assert origins == {"permute_1": "local", **dict.fromkeys(("addmm_1", "tanh", "addmm_2", "_softmax"), "inherited")}
    first = next(f for f in doc["findings"] if f["node"] == "permute_1")
    assert first["code"] == "node_mismatch" and "first divergence" in first["fix"]
    (difference,) = first["differences"]
    assert (
        difference["kind"] == "value" and difference["max_diff"] == pytest.approx(0.5) and len(difference["shape"]) == 2
    )
    assert "elements differ beyond rtol=1e-05, atol=1e-06; largest difference 0.5" in first["message"]
    err = capsys.readouterr().err
    assert "first divergence: permute_1" in err
    assert "elements differ beyond rtol=1e-05, atol=1e-06; largest difference 0.5" in err
    assert re.search(
        r"max abs diff 0\.5, max rel diff [\d.e+-]+, shape \[\d+, \d+\] \(rtol=1e-05, atol=1e-06\)", err
    ), err


def test_tolerance_flags(tmp_path: Path) -> None:
    prog, x = _files(tmp_path)
    bad, _ = _files(tmp_path, perturb="net.4.bias")
    nodes, findings = tmp_path / "a.nodes", tmp_path / "f.json"
    assert main(["run", prog, "--inputs", x, "--save-nodes", str(nodes)]) == 0
    args = ["run", bad, "--inputs", x, "--compare-nodes", str(nodes), "--findings", str(findings)]
    assert main([*args, "--atol", "1.0"]) == 0
    assert main(args) == 1


def test_buffers_and_sym_outputs_compare(tmp_path: Path) -> None:
    """A dynamic program (sym_size outputs, a cond on a SymBool) and a buffer-mutating one compare clean."""
    for name in ("dynamic/decomposed", "counter/decomposed"):
        prog = corpus.get_program(name)
        made = prog.fresh()
        archive = torch_bridge.archive_from_exported_program(prog.ep)
        rec = NodeRecorder(archive.program.graph_module.graph)
        ProgramRunner(archive, observer=rec)(*made[1], **made[2])
        path = rec.save(tmp_path / "a.nodes")
        cmp = NodeComparer(archive.program.graph_module.graph, read_nodes(path))
        ProgramRunner(archive, observer=cmp)(*made[1], **made[2])
        assert cmp.first is None, (name, [f for f in cmp.findings if f.severity != "ok"])
        assert len(cmp.findings) == len(archive.program.graph_module.graph.nodes)


def test_failed_run_is_an_error_finding(tmp_path: Path) -> None:
    prog = corpus.get_program("mlp/decomposed")
    archive = torch_bridge.archive_from_exported_program(prog.ep)
    graph = archive.program.graph_module.graph
    cmp = NodeComparer(graph, m.Values(values={}))
    cmp.seen = 2
    cmp.failed(opwire.KernelError("boom"))
    got = cmp.findings[-1]
    assert (got.node, got.severity, got.code, got.message) == ("relu", "error", "node_failed", "boom")
    assert got.fix == CODES["node_failed"].fix
    assert cmp.first == "relu"


def test_values_missing_from_the_saved_run_are_reported(tmp_path: Path) -> None:
    prog, x = _files(tmp_path)
    empty, findings = tmp_path / "e.nodes", tmp_path / "f.json"
    empty.write_bytes(opwire.dumps(m.Values(values={}), "compact"))
    assert main(["run", prog, "--inputs", x, "--compare-nodes", str(empty), "--findings", str(findings)]) == 0
    doc = json.loads(findings.read_text())
    assert {f["severity"] for f in doc["findings"]} == {"info"}
    assert {f["code"] for f in doc["findings"]} == {"node_not_saved"}
    assert "not in the saved run" in doc["findings"][0]["message"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--findings", "f.json"], "--findings needs --compare-nodes"),
        (["--save-nodes", "a", "--compare-nodes", "b"], "pass one of them"),
        (
            ["--compare-nodes", "prog.opw"],
            "expected a Values file (inputs of `opwire run`/`exec`, or the .nodes file of `opwire run --save-nodes`)",
        ),
        (["--compare-nodes", "missing.nodes"], "missing.nodes"),
    ],
)
def test_bad_node_flags_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    prog, x = _files(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["run", prog, "--inputs", x, *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("opwire run: error:") and message in err, err


def test_node_outputs_are_snapshots(tmp_path: Path) -> None:
    """The recorder keeps bytes at the time a node ran, not a tensor that a later node may change."""
    rec = NodeRecorder(
        m.Graph(inputs=[], outputs=[], nodes=[], tensor_values={}, sym_int_values={}, sym_bool_values={})
    )
    t = torch.ones(2)
    node = m.Node(target="t", inputs=[], outputs=[], metadata={}, name="n")
    rec(node, {"v": t})
    t.add_(1)
    assert tensors.to_tensor(rec.values["v"].value).tolist() == [1.0, 1.0]


def test_stride_only_difference_is_a_warning() -> None:
    archive = torch_bridge.archive_from_exported_program(corpus.get_program("mlp/decomposed").ep)
    graph = archive.program.graph_module.graph
    x = torch.arange(6.0).reshape(2, 3)
    cmp = NodeComparer(graph, m.Values(values={"out": objects.from_python(x, "x")}))
    cmp(graph.nodes[0], {"out": x.t().contiguous().t()})
    (f,) = cmp.findings
    assert (f.code, f.severity, f.fix) == ("node_strides", "warning", CODES["node_strides"].fix)
    assert f.differences is not None and f.differences[0].kind == "stride" and cmp.first is None
