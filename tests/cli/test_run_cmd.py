"""`opwire run`: runs an archive with a Values file; exit 0 / 1 (run failed) / 2 (bad input)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from support import corpus

import opwire
from opwire.cli import main
from opwire.schema import models as m
from opwire.serde import objects, torch_bridge


def _archive(tmp_path: Path, name: str = "mlp/decomposed") -> str:
    path = tmp_path / "prog.opw"
    path.write_bytes(opwire.dumps(torch_bridge.archive_from_exported_program(corpus.get_program(name).ep), "compact"))
    return str(path)


def _values_file(tmp_path: Path, values: dict[str, object], fmt: str = "json") -> str:
    path = tmp_path / f"inputs.{fmt}"
    model = m.Values(values={k: objects.from_python(v) for k, v in values.items()})
    path.write_bytes(opwire.dumps(model, fmt))  # type: ignore[arg-type]
    return str(path)


def test_runs_with_named_inputs_and_writes_outputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    x = torch.randn(5, 8)
    out = tmp_path / "out.json"
    assert main(["run", _archive(tmp_path), "--inputs", _values_file(tmp_path, {"x": x}), "--out", str(out)]) == 0
    printed = capsys.readouterr()
    assert printed.out.startswith("output[0]: float32[5, 4] on cpu  min ")
    assert printed.err.startswith(f"wrote {out}: 1 output as a Values file (json, ")
    got = objects.to_python(opwire.loads(out.read_bytes(), m.Values).values["output[0]"])
    torch.testing.assert_close(got, corpus.get_program("mlp/decomposed").ep.module()(x))


def test_runs_with_args_and_kwargs_inputs_as_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prog = corpus.get_program("pytree/training")
    inputs = _values_file(tmp_path, {"args": list(prog.args), "kwargs": prog.kwargs}, "compact")
    assert main(["run", _archive(tmp_path, prog.name), "--inputs", inputs, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["ok"] and len(summary["outputs"]) == 4


def test_inputs_that_do_not_fit_the_signature_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = _values_file(tmp_path, {"x": torch.randn(5, 7)})
    assert main(["run", _archive(tmp_path), "--inputs", bad]) == 2
    assert capsys.readouterr().err == (
        "opwire run: error: input 'x': expected size 8 at dim 1 (float32[5, 8] on cpu), got 7 (float32[5, 7])\n"
    )


@pytest.mark.parametrize("which", ["program", "inputs", "names"])
def test_bad_input_exits_2(tmp_path: Path, which: str, capsys: pytest.CaptureFixture[str]) -> None:
    program, inputs = _archive(tmp_path), _values_file(tmp_path, {"x": torch.randn(5, 8)})
    if which == "program":
        Path(program).write_bytes(b"\x89OPWIRE\n garbage")
    elif which == "inputs":
        Path(inputs).write_bytes(b"{")
    else:
        inputs = _values_file(tmp_path, {"y": torch.randn(5, 8)})
    assert main(["run", program, "--inputs", inputs]) == 2
    assert capsys.readouterr().err.startswith("opwire run: error:")
