"""`opwire view`: pages for every kind of file opwire reads; exit 2 with one line on bad input."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
from support import corpus
from support.clirun import run_cli

import opwire
from opwire.cli import main
from opwire.schema import models as m
from opwire.serde import torch_bridge


def _page_data(page: Path) -> dict:  # type: ignore[type-arg]
    text = page.read_text()
    raw = re.search(r'<script type="application/json" id="opwire-data">(.*?)</script>', text, re.S)
    assert raw is not None
    return json.loads(raw.group(1))  # type: ignore[no-any-return]


def test_program_json_page_default_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "model.json"
    src.write_bytes(corpus.get_program("transformer/decomposed").json_bytes)
    assert main(["view", str(src), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    page = tmp_path / "model.json.html"
    assert out == {"page": str(page), "bytes": page.stat().st_size}
    data = _page_data(page)
    names = {n.name for n in corpus.get_program("transformer/decomposed").ep.graph.nodes if n.op == "call_function"}
    assert names <= {n["n"] for n in data["graph"]["nodes"]} | {n for n in names if "getitem" in n}
    text = page.read_text()
    assert not re.search(r'(src|href)\s*=\s*["\']?(https?:)?//', text), "the page must fetch nothing"
    assert "dagre" in text and "Content-Security-Policy" in text


def test_pt2_with_custom_ops_needs_no_op_import(tmp_path: Path) -> None:
    """A subprocess that never imports the custom ops draws a .pt2 calling them (torch.export.load could not)."""
    prog = corpus.get_program("custom_op/training")
    src = tmp_path / "custom.pt2"
    torch.export.save(prog.ep, src)
    page = tmp_path / "custom.html"
    done = run_cli("view", src, "--out", page, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"wrote {page} (")
    targets = {n["tf"] for n in _page_data(page)["graph"]["nodes"]}
    assert any(t.startswith("torch.ops.opwire_test.") for t in targets), targets


def test_opwire_archive_in_every_format(tmp_path: Path, fmt: str) -> None:
    archive = torch_bridge.archive_from_exported_program(corpus.get_program("lstm/training").ep)
    src = tmp_path / f"a.{fmt}"
    src.write_bytes(opwire.dumps(archive, fmt))  # type: ignore[arg-type]
    assert main(["view", str(src), "--out", str(tmp_path / "a.html"), "--title", "lstm"]) == 0
    data = _page_data(tmp_path / "a.html")
    assert data["title"] == "lstm" and data["kind"] == "program"
    assert len(data["graph"]["nodes"]) == len(archive.program.graph_module.graph.nodes)


def test_extern_node_file(tmp_path: Path) -> None:
    node = m.Node(
        target="aten::addmm",
        inputs=[m.NamedArgument(name="self", arg=m.Argument(as_tensor=m.TensorArgument(name="b")))],
        outputs=[m.Argument(as_tensor=m.TensorArgument(name="buf0"))],
        metadata={},
    )
    src = tmp_path / "nodes.json"
    src.write_bytes(opwire.dumps(m.ExternKernelNodes(nodes=[m.ExternKernelNode(name="buf0", node=node)])))
    assert main(["view", str(src), "--out", str(tmp_path / "n.html")]) == 0
    data = _page_data(tmp_path / "n.html")
    assert data["kind"] == "extern" and data["graph"]["inputs"][0]["name"] == "b"


def test_findings_from_ops_validate(tmp_path: Path) -> None:
    src = tmp_path / "model.json"
    src.write_bytes(corpus.get_serialized("custom_op/training").json_bytes)
    op = next(n["tf"] for n in _page_data_of(src, tmp_path)["graph"]["nodes"] if "opwire_test" in n["tf"])
    ns, name, overload = op.removeprefix("torch.ops.").split(".")
    report = {"op": f"{ns}::{name}", "findings": [{"code": "W", "severity": "warning", "message": "m", "fix": "f"}]}
    findings = tmp_path / "v.json"
    findings.write_text(json.dumps({"errors": 0, "reports": [report]}))
    assert main(["view", str(src), "--out", str(tmp_path / "p.html"), "--findings", str(findings)]) == 0
    got = _page_data(tmp_path / "p.html")["findings"]
    assert list(got["targets"]) == [f"torch.ops.{ns}.{name}.default"] and overload == "default"


def _page_data_of(src: Path, tmp_path: Path) -> dict:  # type: ignore[type-arg]
    assert main(["view", str(src), "--out", str(tmp_path / "plain.html")]) == 0
    return _page_data(tmp_path / "plain.html")


def test_python_api_both_spellings(tmp_path: Path) -> None:
    prog = corpus.get_program("mlp/training")
    out = opwire.view(torch_bridge.from_exported_program(prog.ep), tmp_path / "a.html")
    assert out == tmp_path / "a.html" and out.stat().st_size > 40_000
    import opwire.view as view_module

    assert view_module(prog.ep, tmp_path / "b.html").exists()  # the module, if it shadows the function, calls it
    assert _page_data(tmp_path / "b.html")["title"] == "ExportedProgram"


@pytest.mark.parametrize(
    ("content", "extra", "message"),
    [
        (b"\x00\x01garbage", [], "neither a .pt2 zip archive, JSON"),
        (b'{"values": {}}', [], "Expected an exported program, an OpwireArchive or an extern-node file, got Values"),
        (None, ["--findings", "nope.json"], "cannot read findings file nope.json"),
    ],
)
def test_bad_input_exits_2(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    content: bytes | None,
    extra: list[str],
    message: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    src = tmp_path / "in.bin"
    src.write_bytes(content if content is not None else corpus.get_serialized("mlp/training").json_bytes)
    assert main(["view", str(src), *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("opwire view: error:") and message in err and err.count("\n") == 1, err
    assert not (tmp_path / "in.bin.html").exists()


def test_missing_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["view", str(tmp_path / "nope.pt2")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("opwire view: error:") and "nope.pt2" in err and err.count("\n") == 1, err
