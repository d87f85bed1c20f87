"""`opwire.open`: one opener for every kind of file, lazy programs, `expect=`, budgets, and running what it opens."""

from __future__ import annotations

import json as _stdlib_json
from pathlib import Path
from typing import Any

import pytest
import torch

import opwire
from opwire.errors import DecodeError
from opwire.program import KINDS, FindingsFile, OpenedProgram, StreamedTrace
from opwire.schema import models as m
from opwire.serde import pt2, torch_bridge


class _Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)
        self.register_buffer("scale", torch.full((3,), 2.0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.lin(x)) * self.scale


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One small program as every file it can be: .pt2, program JSON, compact archive, plus side files."""
    torch.manual_seed(0)
    d = tmp_path_factory.mktemp("open")
    net, x = _Net(), torch.randn(2, 4)
    ep = torch.export.export(net, (x,))
    torch.export.save(ep, d / "net.pt2")
    archive = torch_bridge.archive_from_exported_program(ep)
    (d / "net.json").write_bytes(opwire.dumps(archive.program))
    (d / "net.opwc").write_bytes(opwire.dumps(archive, "compact"))
    (d / "nodes.json").write_text(_stdlib_json.dumps({"nodes": []}))
    (d / "values.json").write_bytes(opwire.dumps(opwire.serde.values({"x": x})))
    (d / "findings.json").write_text(_stdlib_json.dumps({"opwire_findings": 1, "findings": []}))
    with opwire.record() as trace:
        torch.add(x, 1)
    trace.save(d / "trace.json", format="json")
    with opwire.record(path=d / "streamed.trace", progress=False):
        torch.add(x, 1)
    return {"dir": d, "ep": ep, "archive": archive, "x": x, "want": net(x)}


def test_every_kind_comes_back_as_its_own_type(files: dict[str, Any]) -> None:
    d = files["dir"]
    got = {name: opwire.open(d / name) for name in ("net.pt2", "net.json", "net.opwc")}
    assert [(o.kind, type(o)) for o in got.values()] == [
        ("archive", OpenedProgram),
        ("program", OpenedProgram),
        ("archive", OpenedProgram),
    ]
    assert isinstance(opwire.open(d / "nodes.json"), m.ExternKernelNodes)
    assert isinstance(opwire.open(d / "values.json"), m.Values)
    assert isinstance(opwire.open(d / "trace.json"), m.CallTrace)
    assert isinstance(opwire.open(d / "streamed.trace"), StreamedTrace)
    assert isinstance(opwire.open(d / "findings.json"), FindingsFile)
    snap = m.OpLibrarySnapshot(namespaces=[], ops=[], torch_version="2.13.0")
    (d / "snap.json").write_bytes(opwire.dumps(snap))
    assert opwire.open(d / "snap.json") == snap
    assert set(KINDS) == {"program", "archive", "extern_nodes", "trace", "snapshot", "values", "findings"}


def test_every_source_opens_to_the_same_program(files: dict[str, Any]) -> None:
    d, archive = files["dir"], files["archive"]
    program = archive.program
    assert opwire.open((d / "net.json").read_bytes()).program == program
    assert opwire.open(str(d / "net.pt2")).program == program
    assert opwire.open(archive).program is program
    assert opwire.open(archive) is opwire.open(archive)  # a model keeps its opened program
    assert opwire.open(files["ep"]).program == program
    with pt2.open(d / "net.pt2") as lazy:
        assert opwire.open(lazy).program is lazy.program
    opened = opwire.open(d / "net.pt2")
    assert opwire.open(opened) is opened


def test_expect_refuses_another_kind_with_what_came(files: dict[str, Any]) -> None:
    d = files["dir"]
    with pytest.raises(DecodeError) as info:
        opwire.open(d / "values.json", expect="snapshot")
    assert str(info.value) == (
        f"{d / 'values.json'}: expected an op library snapshot (`opwire ops snapshot`), got a Values file (inputs "
        "of `opwire run`/`exec`, or the .nodes file of `opwire run --save-nodes`); `opwire inspect` tells what a "
        "file holds"
    )
    assert opwire.open(d / "net.pt2", expect="program").kind == "archive"  # an archive holds a program
    with pytest.raises(DecodeError, match=r"expected an archive with weights .* got an exported program"):
        opwire.open(d / "net.json", expect="archive")
    with pytest.raises(DecodeError, match=r"expected a trace .* got an extern-node file"):
        opwire.open(m.ExternKernelNodes(nodes=[]), expect="trace")
    with pytest.raises(ValueError, match="unknown kind 'model'"):
        opwire.open(d / "net.json", expect="model")  # type: ignore[call-overload]


@pytest.mark.parametrize("expect", [None, *KINDS])
def test_dev_zero_is_refused_from_its_first_bytes(expect: str | None) -> None:
    with pytest.raises(DecodeError, match=r"^/dev/zero: neither a \.pt2 zip archive, JSON, nor a file opwire wrote"):
        opwire.open("/dev/zero", expect=expect)  # type: ignore[call-overload]


def test_budgets_apply_to_every_kind(files: dict[str, Any], tmp_path: Path) -> None:
    d = files["dir"]
    with pytest.raises(DecodeError, match="max_bytes"):
        opwire.open(d / "values.json", max_bytes=10)
    with pytest.raises(DecodeError, match="max_elements"):
        opwire.open(d / "findings.json", max_elements=1)
    with pytest.raises(DecodeError, match="max_elements"):
        opwire.open(d / "net.json", max_elements=10)
    with pytest.raises(FileNotFoundError):
        opwire.open(tmp_path / "missing.json")
    with pytest.raises(DecodeError, match="Expected a path, bytes, an opwire model"):
        opwire.open(42)


def test_programs_are_decoded_on_first_use(files: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    from opwire.serde import json

    calls: list[str] = []
    real = json.decode

    def spy(data: Any, cls: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(cls.__name__)
        return real(data, cls, *args, **kwargs)

    monkeypatch.setattr(json, "decode", spy)
    opened = opwire.open(files["dir"] / "net.json")
    assert calls == [] and "lazy" in repr(opened)
    assert opened.program.graph_module.graph.nodes
    opened.program  # noqa: B018 - decoded once
    assert calls == ["ExportedProgram"]


def test_a_pt2_opens_without_reading_a_weight(files: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: Any, table: str, name: str, *args: Any) -> Any:
        raise AssertionError(f"{table} {name} was read")

    monkeypatch.setattr(pt2.Pt2Archive, "value", refuse)
    monkeypatch.setattr(pt2.Pt2Archive, "tensor", refuse)
    opened = opwire.open(files["dir"] / "net.pt2")
    assert opened.signature().inputs[0].name == "x"
    assert sorted(opened.names("weights")) == ["lin.bias", "lin.weight", "scale"]
    opened.check()  # bindings checked by name: still nothing read


@pytest.mark.parametrize("how", ["path", "opened", "pt2.open", "pt2.read", "model", "torch"])
def test_run_program_runs_whatever_opens(files: dict[str, Any], how: str) -> None:
    path = files["dir"] / "net.pt2"
    source: Any = {
        "path": lambda: path,
        "opened": lambda: opwire.open(path),
        "pt2.open": lambda: pt2.open(path),
        "pt2.read": lambda: pt2.read(path),
        "model": lambda: files["archive"],
        "torch": lambda: files["ep"],
    }[how]()
    torch.testing.assert_close(opwire.run_program(source, (files["x"],)), files["want"])


def test_an_opened_program_binds_once_across_runs(files: dict[str, Any]) -> None:
    opened = opwire.open(files["dir"] / "net.pt2")
    x = files["x"]
    first = opwire.run_program(opened, (x,))
    ((_, runner),) = opened._bound.values()
    binds = runner.binds
    assert binds == len(opened.program.graph_module.graph.nodes)
    torch.testing.assert_close(opwire.run_program(opened, (x,)), first)
    assert runner.binds == binds
    assert opened.bound(("runner", "None", runner.exec_policy.key()), lambda: None) is runner


def test_an_archive_missing_a_bound_weight_is_refused_once_opened(files: dict[str, Any]) -> None:
    archive = files["archive"].model_copy(deep=True)
    del archive.weights["lin.weight"]
    with pytest.raises(DecodeError, match=r"binds parameter 'lin.weight' but the OpwireArchive model holds no tensor"):
        opwire.run_program(archive, (files["x"],))
    with pytest.raises(DecodeError, match=r"binds parameter 'lin.weight' .* holds no tensor"):
        opwire.run_program(files["dir"] / "net.json", (files["x"],))  # a program alone has no weights
