"""`opwire convert`: every input kind to every target, content detection, exit codes, one-line errors."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch
from torch import nn

import opwire
from opwire.cli import main
from opwire.schema import models as m
from opwire.serde import pt2


class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 2)
        self.register_buffer("bias2", torch.ones(2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x) + self.bias2


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("convert")
    torch.manual_seed(0)
    ep = torch.export.export(_Net(), (torch.randn(1, 3),))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        torch.export.save(ep, d / "net.pt2")
    nothing = torch.export.export(nn.ReLU(), (torch.randn(2),))
    (d / "relu.json").write_bytes(opwire.dumps(opwire.serde.from_exported_program(nothing)))
    return {"pt2": d / "net.pt2", "relu": d / "relu.json", "dir": d}


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(["convert", *map(str, argv)])
    out, err = capsys.readouterr()
    return rc, out, err


def test_pt2_round_trip_through_thrift(codec: str, files: dict[str, Path], capsys, tmp_path: Path) -> None:
    rc, out, _ = _run(capsys, files["pt2"], tmp_path / "a.opw", "--to", codec)
    assert rc == 0 and out.startswith(f"wrote {tmp_path / 'a.opw'}: OpwireArchive as {codec}, ")
    rc, _, _ = _run(capsys, tmp_path / "a.opw", tmp_path / "b.pt2")  # target from the suffix
    assert rc == 0
    assert pt2.read(tmp_path / "b.pt2") == pt2.read(files["pt2"])
    x = torch.randn(1, 3)
    torch.testing.assert_close(
        torch.export.load(tmp_path / "b.pt2").module()(x), torch.export.load(files["pt2"]).module()(x)
    )


def test_json_is_torchs_model_json(files: dict[str, Path], capsys, tmp_path: Path) -> None:
    rc, out, _ = _run(capsys, files["pt2"], tmp_path / "p.json")
    assert rc == 0 and "ExportedProgram as json" in out
    with pt2.open(files["pt2"]) as archive:
        assert (tmp_path / "p.json").read_bytes() == archive.program_json
    # JSON program -> compact program -> JSON again: identical bytes
    assert _run(capsys, tmp_path / "p.json", tmp_path / "p.opw", "--to", "compact")[0] == 0
    assert opwire.loads((tmp_path / "p.opw").read_bytes(), m.ExportedProgram, format="compact")
    assert _run(capsys, tmp_path / "p.opw", tmp_path / "q.json")[0] == 0
    assert (tmp_path / "q.json").read_bytes() == (tmp_path / "p.json").read_bytes()


def test_program_without_weights_to_pt2(files: dict[str, Path], capsys, tmp_path: Path) -> None:
    assert _run(capsys, files["relu"], tmp_path / "relu.pt2")[0] == 0
    x = torch.randn(2)
    torch.testing.assert_close(torch.export.load(tmp_path / "relu.pt2").module()(x), x.relu())


def test_archive_json_input(files: dict[str, Path], capsys, tmp_path: Path) -> None:
    (tmp_path / "a.json").write_bytes(opwire.dumps(pt2.read(files["pt2"])))
    assert _run(capsys, tmp_path / "a.json", tmp_path / "a.pt2")[0] == 0
    assert pt2.read(tmp_path / "a.pt2") == pt2.read(files["pt2"])


def test_bad_inputs_exit_2_with_one_line(files: dict[str, Path], capsys, tmp_path: Path) -> None:
    (tmp_path / "junk.bin").write_bytes(b"\x00\x01garbage")
    (tmp_path / "values.json").write_bytes(opwire.dumps(m.Values(values={})))
    (tmp_path / "p.json").write_bytes(pt2.read(files["pt2"]).program.model_dump_json().encode())
    cases = {
        (tmp_path / "junk.bin", "x.json"): "neither a .pt2 zip archive, JSON, nor a file opwire wrote in Thrift form",
        (tmp_path / "values.json", "x.json"): "holds a Values; convert handles programs",
        (tmp_path / "p.json", "x.pt2"): "the program binds parameter 'lin.weight' but the input carries no weights",
        (tmp_path / "missing.json", "x.json"): "No such file or directory",
        (files["pt2"], "x.dat"): "cannot tell the output format from",
    }
    for (src, dst), message in cases.items():
        rc, out, err = _run(capsys, src, tmp_path / dst)
        assert rc == 2 and out == ""
        assert err.count("\n") == 1 and err.startswith("opwire convert: error: ") and message in err, err
