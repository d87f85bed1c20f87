"""The CLI speaks CLI: no error advises a Python call; wrong-kind and raw files name the command that reads them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support.clirun import Cli

import opwire
from opwire.cli import main
from opwire.cli.wording import PYTHON_ADVICE, for_cli
from opwire.schema import models as m

LIBRARY_MESSAGES = [
    "x.bin: neither JSON nor Thrift with opwire's header; raw Thrift needs its codec and type: "
    "opwire.loads(data, cls, format=...)",
    "raw Thrift compact (no opwire header) does not say what type it holds; pass the type: "
    "opwire.loads(data, m.ExportedProgram, format='compact') (models: opwire.schema.models)",
    "t.json: the JSON's top-level keys are those of CallTrace, not ExportedProgram (missing graph_module); "
    "read it as CallTrace, or call opwire.loads(data) without a type",
    "x: the file holds a Values, not a ExportedProgram; read it as Values",
    "the program binds parameter 'w' but the archive holds no tensor for it - at `x`; pass an OpwireArchive with "
    "its weights (opwire.serde.pt2.read or torch_bridge.archive_from_exported_program)",
    "input 'x': expected float32[3] on cpu, got dtype int64[3]; convert it (x.to(torch.float32))",
]


@pytest.mark.parametrize("message", LIBRARY_MESSAGES)
def test_python_advice_is_reworded(message: str) -> None:
    out = for_cli(message)
    assert not PYTHON_ADVICE.search(out), out
    assert "opwire " in out or "give the input as float32" in out


def test_a_file_of_another_kind_names_the_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    values = tmp_path / "v.bin"
    values.write_bytes(opwire.dumps(m.Values(values={"n": m.Value(as_int=3)}), format="compact"))
    assert main(["run", str(values), "--inputs", str(values)]) == 2
    err = capsys.readouterr().err
    assert not PYTHON_ADVICE.search(err), err
    assert re.search(r"--inputs|opwire inspect", err), err


def test_raw_thrift_through_a_subprocess(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "raw.bin").write_bytes(b"\x0c\x00\x01\x0b\x00\x01\x00\x00\x00\x01a\x00\x00")
    done = cli("inspect", "raw.bin")
    assert done.returncode == 2
    assert not PYTHON_ADVICE.search(done.stderr), done.stderr
    assert "opwire convert IN OUT --to compact" in done.stderr


def test_an_empty_file_is_called_empty(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "e.json").write_bytes(b"")
    (tmp_path / "e.trace").write_bytes(b"")
    assert main(["inspect", str(tmp_path / "e.json")]) == 2
    assert capsys.readouterr().err == (
        f"opwire inspect: error: {tmp_path / 'e.json'}: the file is empty (0 bytes); it was not written completely, "
        "or is not the file meant\n"
    )
    assert main(["replay", str(tmp_path / "e.trace")]) == 2
    assert "e.trace: the trace is empty (0 bytes)" in capsys.readouterr().err
    with pytest.raises(opwire.OpwireError, match="the trace is empty"):
        opwire.load_trace(tmp_path / "e.trace")


def test_convert_knows_the_opw_suffix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "p.json").write_text("{}")
    assert main(["convert", str(tmp_path / "p.json"), str(tmp_path / "p.xyz")]) == 2
    err = capsys.readouterr().err
    assert "cannot tell the output format from the suffix of" in err and "pass --to" in err
    assert main(["convert", str(tmp_path / "p.json"), str(tmp_path / "p.opw")]) == 2
    assert "cannot tell" not in capsys.readouterr().err


def test_snapshot_out_says_what_it_wrote(cli: Cli, tmp_path: Path) -> None:
    done = cli("ops", "snapshot", "aten", "--out", "aten.json")
    assert done.returncode == 0, done.stderr
    assert re.fullmatch(
        r"wrote aten\.json: \d+ ops of aten as json, \d+ bytes \(compare later with: opwire ops bc-check aten\.json\)\n",
        done.stdout,
    ), done.stdout
    assert (tmp_path / "aten.json").stat().st_size > 1000
