"""`opwire.program.summary` (what `opwire inspect` prints, for API users too) and a program's inputs read from a
file and bound by name (`read_inputs`, `bind_inputs`: what `opwire run` does)."""

from __future__ import annotations

import json as _stdlib_json
from pathlib import Path
from typing import Any

import pytest
import torch

import opwire
from opwire import program, recording
from opwire.errors import BindError, DecodeError


class _Pair(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x * 2 + y


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    d = tmp_path_factory.mktemp("summary")
    x, y = torch.ones(2, 3), torch.zeros(2, 3)
    ep = torch.export.export(_Pair(), (x, y))
    torch.export.save(ep, d / "pair.pt2")
    (d / "pair.json").write_bytes(opwire.dumps(opwire.serde.from_exported_program(ep)))
    (d / "pair.compact").write_bytes(opwire.dumps(opwire.serde.from_exported_program(ep), "compact"))
    with opwire.record(path=d / "streamed.trace", progress=False):
        torch.add(x, 1)
    return {"dir": d, "x": x, "y": y}


def test_summary_says_kind_and_codec_of_each_file(files: dict[str, Any]) -> None:
    d = files["dir"]
    by_file = {name: program.summary(opwire.open(d / name), d / name) for name in ("pair.pt2", "pair.json")}
    assert [(s.kind, s.codec) for s in by_file.values()] == [
        ("pt2 archive", "zip archive"),
        ("ExportedProgram", "json"),
    ]
    assert [p.name for p in by_file["pair.json"].inputs or []] == ["x", "y"]
    compact = program.summary(opwire.open(d / "pair.compact"))  # the opened program names its file
    assert compact.codec.startswith("thrift compact (opwire header")


def test_summary_of_a_model_in_memory_and_a_values_record() -> None:
    values = opwire.serde.values({"n": 3, "t": torch.zeros(2, 8)})
    out = program.summary(values)
    assert (out.kind, out.codec) == ("Values", "model (in memory)")
    assert out.values == {"n": "int 3", "t": "float32[2, 8] on cpu"}


def test_a_streamed_trace_is_summarized_by_the_recording_layer(files: dict[str, Any]) -> None:
    trace = opwire.open(files["dir"] / "streamed.trace")
    with pytest.raises(DecodeError, match=r"opwire\.recording\.stream_summary"):
        program.summary(trace)
    out = recording.stream_summary(trace, verify=True)
    assert (out.kind, out.records) == ("streamed CallTrace", 1)
    assert out.verified is not None and "SHA-256" in out.verified


def test_verify_on_a_file_without_checksums_says_so(files: dict[str, Any]) -> None:
    path = files["dir"] / "pair.json"
    with pytest.raises(DecodeError, match="carries no checksums"):
        program.summary(opwire.open(path), path, verify=True)


def test_named_inputs_bind_in_the_program_order(files: dict[str, Any], tmp_path: Path) -> None:
    opened = opwire.open(files["dir"] / "pair.pt2")
    inputs = tmp_path / "inputs.json"
    inputs.write_text(_stdlib_json.dumps({"y": [[1, 1, 1], [1, 1, 1]], "x": [[1, 2, 3], [4, 5, 6]]}))
    named = program.read_inputs(inputs, None, dtypes=program.input_dtypes(opened))
    assert named["x"].dtype == torch.float32  # plain-JSON ints become the dtype the program takes
    args, kwargs = program.bind_inputs(opened, named)
    assert [a.tolist() for a in args] == [[[1, 2, 3], [4, 5, 6]], [[1, 1, 1], [1, 1, 1]]] and kwargs == {}
    with pytest.raises(BindError, match="input 'y' is missing"):
        program.bind_inputs(opened, {"x": named["x"]})


def test_an_inputs_file_of_no_known_form_is_refused_by_its_first_bytes(tmp_path: Path) -> None:
    path = tmp_path / "inputs.bin"
    path.write_bytes(b"\x00\x01garbage")
    with pytest.raises(DecodeError, match="not a Values JSON object"):
        program.read_inputs(path, None)
    zipped = tmp_path / "inputs.pt"
    torch.save({"x": torch.ones(1)}, zipped)
    with pytest.raises(DecodeError, match="--allow-pickle"):
        program.read_inputs(zipped, None)
    assert program.read_inputs(zipped, None, allow_pickle=True)["x"].tolist() == [1.0]


def test_run_program_binds_inputs_by_name_as_opwire_run_does(files: dict[str, Any]) -> None:
    path = files["dir"] / "pair.pt2"
    x, y = files["x"], files["y"]
    got = opwire.run_program(path, {"y": y, "x": x})
    assert torch.equal(got, x * 2 + y)
    with pytest.raises(BindError, match="input 'x' is missing"):
        opwire.run_program(path, {"y": y})
    with pytest.raises(BindError, match="not both"):
        opwire.run_program(path, {"x": x, "y": y}, {"y": y})
