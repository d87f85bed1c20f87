"""opwire.serde.values / python_values: the inputs files of `opwire run` and `opwire exec` from Python."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import opwire
from opwire.cli import main
from opwire.schema import models as m
from opwire.serde import EncodeError


def test_values_round_trip(fmt: str) -> None:
    x = torch.randn(2, 3).t()  # non-contiguous: strides restored
    record = opwire.serde.values({"x": x, "n": 3, "f": -0.5, "dt": torch.float16, "l": [1, None, "s"], "c": 1 + 2j})
    back = opwire.serde.python_values(opwire.loads(opwire.dumps(record, fmt), m.Values, fmt))  # type: ignore[arg-type]
    assert torch.equal(back["x"], x) and back["x"].stride() == x.stride()
    assert back["n"] == 3 and back["f"] == -0.5 and back["dt"] is torch.float16
    assert back["l"] == [1, None, "s"] and back["c"] == 1 + 2j


def test_unsupported_object_names_its_path() -> None:
    with pytest.raises(EncodeError, match=r"got object - at `args\[1\]`"):
        opwire.serde.values({"args": [1, object()]})


def test_run_cli_with_a_values_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Tanh())
    x = torch.randn(4, 3)
    ep = torch.export.export(model, (x,))
    archive = opwire.serde.torch_bridge.archive_from_exported_program(ep)
    (tmp_path / "model.opw").write_bytes(opwire.dumps(archive, format="compact"))
    (tmp_path / "inputs.json").write_bytes(opwire.dumps(opwire.serde.values({"args": [x]})))
    out = tmp_path / "out.json"
    code = main(["run", str(tmp_path / "model.opw"), "--inputs", str(tmp_path / "inputs.json"), "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    outputs = opwire.serde.python_values(opwire.loads(out.read_bytes(), m.Values))
    (result,) = outputs.values()
    assert torch.allclose(result, model(x))
