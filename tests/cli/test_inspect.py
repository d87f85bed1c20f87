"""`opwire inspect`: summaries of programs and extern-node files, exit codes on bad input."""

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


def _extern_nodes() -> m.ExternKernelNodes:
    node = m.Node(
        target="aten::addmm",
        inputs=[
            m.NamedArgument(name="self", arg=m.Argument(as_tensor=m.TensorArgument(name="b")), kind=None),
            m.NamedArgument(name="beta", arg=m.Argument(as_int=1), kind=None),
        ],
        outputs=[m.Argument(as_tensor=m.TensorArgument(name="buf0"))],
        metadata={},
    )
    return m.ExternKernelNodes(nodes=[m.ExternKernelNode(name="buf0", node=node)])


def test_inspect_program_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prog = corpus.get_program("cond/training")
    path = tmp_path / "model.json"
    path.write_bytes(prog.json_bytes)
    assert main(["inspect", str(path), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["kind"] == "ExportedProgram"
    assert summary["schema_version"] == "8.20"
    assert summary["argument_members"]["as_graph"] == 2
    assert summary["ops"]["torch.ops.higher_order.cond"] == 1
    assert summary["nodes"] == sum(summary["ops"].values())


def test_inspect_text_lists_ops(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "model.json"
    path.write_bytes(corpus.get_serialized("mlp/decomposed").json_bytes)
    assert main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("kind: ExportedProgram\ncodec: json\nschema_version: 8.20\n")
    assert "aten::addmm.default" in out and "torch.ops." not in out


def test_inspect_extern_nodes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "abc.wrapper.json"
    path.write_bytes(opwire.dumps(_extern_nodes()))
    assert main(["inspect", str(path), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)  # an InspectOutput record: fields that do not apply are null
    assert {k: v for k, v in summary.items() if v is not None} == {
        "kind": "ExternKernelNodes",
        "codec": "json",
        "nodes": 1,
        "ops": {"aten::addmm.default": 1},
        "argument_members": {"as_int": 1, "as_tensor": 2},
        "reads": [{"index": 0, "name": "buf0", "op": "aten::addmm.default", "reads": ["b"]}],
    }


@pytest.mark.parametrize(
    "content, message",
    [
        (b'{"a": 1}', "is none of the types opwire reads"),
        (b'{"graph_module": 1, "schema_version": {"major": 8, "minor": 20}}', "Expected struct GraphModule"),
        (b"[1, 2]", "expected a JSON object at the top level"),
    ],
)
def test_inspect_bad_input_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, message: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    assert main(["inspect", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("opwire inspect: error: ")
    assert message in err
    assert err.count("\n") == 1


def test_inspect_missing_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", "/nonexistent/x.json"]) == 2
    assert capsys.readouterr().err == "opwire inspect: error: No such file or directory: /nonexistent/x.json\n"


def test_inspect_pt2_reads_no_weights(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    from opwire.serde.archive import ZipArchive

    prog = corpus.get_program("conv_bn/training")
    path = tmp_path / "model.pt2"
    torch.export.save(prog.ep, path)
    read: list[str] = []
    original = ZipArchive.read

    def spy(self: ZipArchive, name: str, *, verify: bool = True) -> bytes:
        read.append(name)
        return original(self, name, verify=verify)

    monkeypatch.setattr(ZipArchive, "read", spy)  # opwire's one zip reader (serde/archive.py)
    assert main(["inspect", str(path), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["kind"] == "pt2 archive"
    assert summary["weights"] == len(prog.ep.state_dict)
    assert read and all(name.endswith((".json", "archive_format", "archive_version")) for name in read)


def test_inspect_framed_thrift(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "nodes.opw"
    path.write_bytes(opwire.dumps(_extern_nodes(), format="compact"))
    assert main(["inspect", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["kind"] == "ExternKernelNodes"


def test_inspect_random_bytes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "noise.bin"
    path.write_bytes(bytes(range(7, 200)))
    assert main(["inspect", str(path)]) == 2
    assert "no opwire header" in capsys.readouterr().err


def test_inspect_streamed_trace_and_a_cut_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import torch

    path = tmp_path / "s.trace"
    with opwire.record(path=path):
        torch.ones(3).tanh()
    assert main(["inspect", str(path), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["kind"] == "streamed CallTrace" and summary["ops"] == {
        "aten::ones.default": 1,
        "aten::tanh.default": 1,
    }
    assert summary["cut"] is None
    data = path.read_bytes()
    (tmp_path / "cut.trace").write_bytes(data[: len(data) - 5])
    assert main(["inspect", str(tmp_path / "cut.trace")]) == 0
    assert "cut: the trace is cut at byte" in capsys.readouterr().out


def test_inspect_names_the_codec_and_shows_values(cli: Cli, tmp_path: Path) -> None:
    values = opwire.serde.values({"x": torch.randn(2, 8), "n": 3})
    (tmp_path / "in.bin").write_bytes(opwire.dumps(values, format="compact"))
    done = cli("inspect", "in.bin")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    major, minor = m.RECORDS_VERSION
    assert lines[:3] == ["kind: Values", f"codec: thrift compact (opwire header, schema {major}.{minor})", "values:"]
    assert lines[3].split() == ["x", "float32[2,", "8]", "on", "cpu"]
    assert lines[4].split() == ["n", "int", "3"]
