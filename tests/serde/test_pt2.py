"""torch .pt2 archives: lazy pickle-free reading (current and legacy layouts), writing torch accepts, bad archives."""

from __future__ import annotations

import io
import json
import warnings
import zipfile
from pathlib import Path

import pytest
import torch
from torch import nn

from opwire.errors import DecodeError
from opwire.schema import models as m
from opwire.serde import pt2, tensors


class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 4)
        self.tw = nn.Parameter(torch.randn(4, 3).t())  # non-contiguous parameter
        self.register_buffer("scale", torch.full((4,), 2.0))
        self.register_buffer("shift", torch.arange(4.0), persistent=False)
        self.const = torch.arange(12, dtype=torch.int64).reshape(3, 4)[1:]  # sliced tensor constant

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x) * self.scale + self.shift + x @ self.tw + self.const.sum()


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, nn.Module, torch.export.ExportedProgram]:
    torch.manual_seed(0)
    net = _Net()
    ep = torch.export.export(net, (torch.randn(2, 3),))
    path = tmp_path_factory.mktemp("pt2") / "net.pt2"
    with warnings.catch_warnings():  # torch warns that the sliced constant's storage is larger than it
        warnings.simplefilter("ignore", UserWarning)
        torch.export.save(ep, path)
    return path, net, ep


def test_read_matches_torch(saved: tuple[Path, nn.Module, torch.export.ExportedProgram]) -> None:
    path, _, ep = saved
    archive = pt2.read(path)
    assert set(archive.weights) == set(ep.state_dict) and set(archive.constants) == set(ep.constants)
    for name, t in [*ep.state_dict.items(), *ep.constants.items()]:
        tv = archive.weights.get(name) or archive.constants[name]
        back = tensors.to_tensor(tv)
        assert back.stride() == t.stride() and back.storage_offset() == t.storage_offset()
        assert torch.equal(back.detach(), t.detach()) and back.requires_grad == t.requires_grad
    assert archive.weights["tw"].strides == [1, 3]
    assert archive.example_args is None  # the sample inputs are pickled: not loaded by default


def test_lazy_open_reads_only_json(saved: tuple[Path, nn.Module, torch.export.ExportedProgram], monkeypatch) -> None:
    path, _, _ = saved
    read: list[str] = []
    original = pt2.Pt2Archive._bytes

    def spy(self: pt2.Pt2Archive, name: str) -> bytes:
        read.append(name)
        return original(self, name)

    monkeypatch.setattr(pt2.Pt2Archive, "_bytes", spy)
    with pt2.open(path) as archive:
        assert archive.layout == "pt2" and archive.model == "model"
        assert archive.program.graph_module.graph.nodes
        assert all(n.endswith((".json", "archive_format", "archive_version")) for n in read), read
        assert set(archive.names("weights")) == {"lin.weight", "lin.bias", "tw", "scale"}
        assert not any("/weight_" in n for n in read)
        archive.value("weights", "scale")
    assert any("/weight_" in n for n in read)
    assert pt2.read_program(path) == archive.program


def test_allow_pickle_loads_example_inputs(saved: tuple[Path, nn.Module, torch.export.ExportedProgram]) -> None:
    path, _, ep = saved
    with pt2.open(path) as lazy:
        lazy.materialize()
        assert [kind for kind, _, _ in lazy.pickled] == ["example_inputs"]
    archive = pt2.read(path, allow_pickle=True)
    assert archive.example_args is not None and archive.example_kwargs == {}
    assert torch.equal(tensors.to_tensor(archive.example_args[0].as_tensor), ep.example_inputs[0][0])


def test_write_is_loaded_by_torch(saved: tuple[Path, nn.Module, torch.export.ExportedProgram], tmp_path: Path) -> None:
    path, net, _ = saved
    archive = pt2.read(path, allow_pickle=True)
    out = tmp_path / "again.pt2"
    pt2.write(archive, out)
    loaded = torch.export.load(out)
    x = torch.randn(2, 3)
    torch.testing.assert_close(loaded.module()(x), net(x))
    assert pt2.read(out, allow_pickle=True) == archive


def _rezip(src: Path, dst: Path, edit: dict[str, bytes | None]) -> None:
    """Copy a zip, replacing (bytes) or dropping (None) the entries whose names end with a key of `edit`."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            key = next((k for k in edit if info.filename.endswith(k)), None)
            if key is None:
                zout.writestr(info.filename, zin.read(info))
            elif edit[key] is not None:
                zout.writestr(info.filename, edit[key])  # type: ignore[arg-type]


def _weights_config(path: Path) -> dict:
    with zipfile.ZipFile(path) as z:
        name = next(n for n in z.namelist() if n.endswith("model_weights_config.json"))
        return json.loads(z.read(name))


def test_pickled_entry_is_reported(saved: tuple[Path, nn.Module, torch.export.ExportedProgram], tmp_path: Path) -> None:
    path, _, ep = saved
    config = _weights_config(path)
    config["config"]["scale"]["use_pickle"] = True
    config["config"]["scale"]["path_name"] = "weight_99"
    buf = io.BytesIO()
    torch.save(ep.state_dict["scale"], buf)
    bad = tmp_path / "pickled.pt2"
    _rezip(path, bad, {"model_weights_config.json": json.dumps(config).encode()})
    with zipfile.ZipFile(bad, "a") as z:
        z.writestr(f"{z.namelist()[0].split('/')[0]}/data/weights/weight_99", buf.getvalue())
    with pytest.raises(DecodeError) as info:
        pt2.read(bad)
    assert "weights['scale'] is stored pickled in `" in str(info.value)
    assert "data/weights/weight_99`" in str(info.value) and "allow_pickle=True" in str(info.value)
    assert pt2.read_program(bad) == pt2.read_program(path)  # the program alone needs no pickle
    archive = pt2.read(bad, allow_pickle=True)
    assert torch.equal(tensors.to_tensor(archive.weights["scale"]), ep.state_dict["scale"])


def test_legacy_layout(saved: tuple[Path, nn.Module, torch.export.ExportedProgram], tmp_path: Path) -> None:
    from torch._export.serde.serialize import serialize

    _, net, ep = saved
    art = serialize(ep)
    legacy = tmp_path / "legacy.pt2"
    with zipfile.ZipFile(legacy, "w") as z:
        z.writestr("serialized_exported_program.json", art.exported_program)
        z.writestr("serialized_state_dict.pt", art.state_dict)
        z.writestr("serialized_constants.pt", art.constants)
        z.writestr("serialized_example_inputs.pt", art.example_inputs)
        z.writestr("version", "8.20")
    assert pt2.open(legacy).layout == "legacy"
    assert pt2.read_program(legacy) == pt2.read_program(saved[0])
    with pytest.raises(DecodeError, match=r"stored pickled in `serialized_state_dict\.pt`"):
        pt2.read(legacy)
    archive = pt2.read(legacy, allow_pickle=True)
    assert set(archive.weights) == set(ep.state_dict) and set(archive.constants) == set(ep.constants)
    out = tmp_path / "modern.pt2"
    pt2.write(archive, out)
    x = torch.randn(2, 3)
    torch.testing.assert_close(torch.export.load(out).module()(x), net(x))


def _bad_cases(path: Path, tmp: Path) -> dict[str, tuple[Path, str]]:
    config = _weights_config(path)
    config["config"]["scale"]["tensor_meta"]["dtype"] = 99
    cases: dict[str, tuple[Path, str]] = {}

    def make(name: str, edit: dict[str, bytes | None], message: str) -> None:
        target = tmp / f"{name}.pt2"
        _rezip(path, target, edit)
        cases[name] = (target, message)

    make("truncated_weight", {"data/weights/weight_0": b"\0" * 5}, "Expected a storage of at least")
    make("unknown_dtype", {"model_weights_config.json": json.dumps(config).encode()}, "unknown value 99 of enum")
    make("no_format", {"archive_format": None}, "a zip archive but not one torch.export.save wrote")
    make(
        "future_version", {"archive_version": b"7"}, "archive_version is b'7'; this opwire reads pt2 archive version 0"
    )
    make("no_program", {"models/model.json": None}, "no exported program (models/*.json)")
    make("bad_json", {"models/model.json": b"{not json"}, "invalid JSON")
    make("no_index", {"model_weights_config.json": None}, "missing entry `")
    not_zip = tmp / "not_zip.pt2"
    not_zip.write_bytes(b"PK\x03\x04garbage")
    cases["not_zip"] = (not_zip, "not a readable zip archive")
    return cases


BAD = [
    "truncated_weight",
    "unknown_dtype",
    "no_format",
    "future_version",
    "no_program",
    "bad_json",
    "no_index",
    "not_zip",
]


@pytest.mark.parametrize("case", BAD)
def test_bad_archive_is_decode_error(
    case: str, saved: tuple[Path, nn.Module, torch.export.ExportedProgram], tmp_path: Path
) -> None:
    target, message = _bad_cases(saved[0], tmp_path)[case]
    with pytest.raises(DecodeError) as info:
        pt2.read(target)
    assert message in str(info.value)
    assert str(target) in str(info.value)


def test_write_refuses_bad_tensor(saved: tuple[Path, nn.Module, torch.export.ExportedProgram], tmp_path: Path) -> None:
    from opwire.errors import EncodeError

    archive = pt2.read(saved[0])
    broken = archive.weights["scale"].model_copy(update={"data": b"\0"})
    bad = archive.model_copy(update={"weights": {**archive.weights, "scale": broken}})
    with pytest.raises(EncodeError, match=r"cannot write weights\['scale'\]: Expected 16 bytes"):
        pt2.write(bad, tmp_path / "x.pt2")
    assert isinstance(archive, m.OpwireArchive)
