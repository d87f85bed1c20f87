""".pt2 tensors mapped, not copied: views of the file, checked first, CRC on demand, entries read once, the file never
written, and `run_program(pt2.open(path))` running on them."""

from __future__ import annotations

import ctypes
import json
import mmap
import random
import zipfile
from pathlib import Path

import pytest
import torch
from torch import nn

import opwire
from opwire.errors import DecodeError
from opwire.serde import pt2, tensors
from opwire.serde.archive import ZipArchive


def _fresh(path: Path, x: torch.Tensor) -> torch.Tensor:
    """torch's output from a fresh load (an ExportedProgram's module mutates the program's own buffers)."""
    return torch.export.load(path).module()(x)


class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.tied = self.lin.weight  # the same parameter under a second name: torch stores it once
        self.tw = nn.Parameter(torch.randn(4, 4).t())  # non-contiguous
        self.register_buffer("count", torch.zeros(4))
        self.const = torch.arange(8.0)[2:6]  # a view into a larger storage

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.count.add_(1)
        return self.lin(x) @ self.tw + self.count + self.const + self.tied.sum()


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, torch.export.ExportedProgram]:
    torch.manual_seed(0)
    ep = torch.export.export(_Net(), (torch.randn(2, 4),))
    path = tmp_path_factory.mktemp("mapped") / "net.pt2"
    torch.export.save(ep, path)
    return path, ep


def test_tensors_view_the_mapped_file(saved: tuple[Path, torch.export.ExportedProgram]) -> None:
    path, ep = saved
    archive = pt2.open(path)
    weights, constants = archive.tensors()
    assert archive._mapped is not None
    buf = archive._mapped.buffer
    assert isinstance(buf, mmap.mmap)
    lo = ctypes.addressof(ctypes.c_char.from_buffer(buf))
    for name, t in [*weights.items(), *constants.items()]:
        ref = ep.state_dict.get(name, ep.constants.get(name))
        assert ref is not None
        assert torch.equal(t, ref.detach()) and t.stride() == ref.stride()
        assert lo <= t.data_ptr() < lo + len(buf), f"{name} is a copy, not a view of the mapping"
    assert weights["tw"].stride() == (1, 4)
    assert constants["const"].storage_offset() == ep.constants["const"].storage_offset()


def test_run_program_on_the_lazy_archive(saved: tuple[Path, torch.export.ExportedProgram]) -> None:
    path, _ = saved
    x = torch.randn(2, 4)
    expected = _fresh(path, x)
    before = path.read_bytes()
    with pt2.open(path) as archive:
        assert torch.allclose(opwire.run_program(archive, (x,)), expected)
        assert torch.allclose(opwire.run_program(archive, (x,)), expected)  # buffers copied per run: fresh again
    assert torch.allclose(opwire.run_program(path, (x,)), expected)
    assert path.read_bytes() == before  # the mutated buffer never reached the file


def test_writes_stay_private(saved: tuple[Path, torch.export.ExportedProgram]) -> None:
    path, _ = saved
    before = path.read_bytes()
    weights, _ = pt2.open(path).tensors()
    weights["count"].add_(7)
    assert path.read_bytes() == before
    again, _ = pt2.open(path).tensors()
    assert torch.equal(again["count"], torch.zeros(4))


def test_shared_entry_is_mapped_once_and_shared_like_torch(saved: tuple[Path, torch.export.ExportedProgram]) -> None:
    path, _ = saved
    archive = pt2.open(path)
    assert archive.locations("weights")["tied"].path_name == archive.locations("weights")["lin.weight"].path_name
    weights, _ = archive.tensors()
    assert weights["tied"].data_ptr() == weights["lin.weight"].data_ptr()  # torch's loader shares them too


def test_crc_is_checked_on_demand(saved: tuple[Path, torch.export.ExportedProgram], tmp_path: Path) -> None:
    path, _ = saved
    bad = tmp_path / "bad.pt2"
    data = bytearray(path.read_bytes())
    with ZipArchive(path) as z:
        entry = next(n for n in z.names() if n.endswith("data/weights/weight_0"))
        start, _ = z.span(entry)
    data[start] ^= 0xFF
    bad.write_bytes(bytes(data))
    weights, _ = pt2.open(bad).tensors()  # no CRC up front: opening and mapping read nothing
    assert len(weights) == 5
    with pytest.raises(DecodeError, match=r"weight_0`: CRC-32 mismatch"):
        pt2.open(bad, verify=True).tensors()
    with pytest.raises(DecodeError, match="CRC-32 mismatch"):
        pt2.open(bad).verify()
    with pytest.raises(DecodeError, match="CRC-32 mismatch"):
        pt2.read(bad, verify=True)
    pt2.open(path, verify=True).verify()


def test_read_copies_once_and_runs_without_another_copy(saved: tuple[Path, torch.export.ExportedProgram]) -> None:
    path, _ = saved
    archive = pt2.read(path)
    tv = archive.weights["lin.weight"]
    t = tensors.shared_tensor(tv)
    assert t.data_ptr() == ctypes.cast(ctypes.c_char_p(tv.data), ctypes.c_void_p).value  # a view of the payload
    assert tensors.to_tensor(tv).data_ptr() != t.data_ptr()  # the public rebuild still copies
    x = torch.randn(2, 4)
    assert torch.allclose(opwire.run_program(archive, (x,)), _fresh(path, x))


def _rewrite(src: Path, dst: Path, edit: dict[str, bytes], deflate: set[str]) -> None:
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            data = edit.get(info.filename, zin.read(info))
            method = zipfile.ZIP_DEFLATED if info.filename in deflate else zipfile.ZIP_STORED
            zout.writestr(info.filename, data, compress_type=method)


def test_deflated_entry_named_by_many_weights_is_inflated_once(
    saved: tuple[Path, torch.export.ExportedProgram], tmp_path: Path
) -> None:
    """Issue 16: one deflated entry named by several weights is read once, and the ratio is the archive's."""
    path, _ = saved
    with zipfile.ZipFile(path) as z:
        root = z.namelist()[0].split("/")[0]
        config_name = f"{root}/data/weights/model_weights_config.json"
        config = json.loads(z.read(config_name))
    big = random.Random(0).randbytes(4 << 20)  # incompressible: the entry is most of the archive
    meta = config["config"]["count"]
    meta["tensor_meta"]["sizes"] = [{"as_int": 1 << 20}]
    meta["path_name"] = "weight_big"
    for i in range(12):
        config["config"][f"extra{i}"] = meta
    dst = tmp_path / "shared.pt2"
    _rewrite(path, dst, {config_name: json.dumps(config).encode()}, set())
    with zipfile.ZipFile(dst, "a", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr(f"{root}/data/weights/weight_big", big)
    archive = pt2.open(dst)
    weights, _ = archive.tensors()
    assert archive._zip.inflated == len(big)  # once, not 13 times
    assert len({weights[f"extra{i}"].data_ptr() for i in range(12)}) == 1
    materialized = pt2.read(dst)
    assert materialized.weights["extra3"].data is materialized.weights["extra4"].data  # one bytes object
    # asking for the same entry again and again is charged to the archive's ratio, not per entry
    again = pt2.open(dst, max_ratio=1)  # the archive is a little larger than the entry: one inflation fits
    again.value("weights", "extra0")
    with pytest.raises(DecodeError, match=r"bytes inflated from this archive .* exceeds the budget max_ratio=1"):
        again.value("weights", "extra1")


def test_bad_layouts_are_refused_before_a_view(
    saved: tuple[Path, torch.export.ExportedProgram], tmp_path: Path
) -> None:
    path, _ = saved
    with zipfile.ZipFile(path) as z:
        root = z.namelist()[0].split("/")[0]
        config_name = f"{root}/data/weights/model_weights_config.json"
        config = json.loads(z.read(config_name))
    cases = {
        "past the entry": ({"sizes": [{"as_int": 1 << 30}]}, r"Expected a storage of at least"),
        "negative stride": ({"strides": [{"as_int": -1}]}, r"Expected non-negative"),
        "offset past": ({"storage_offset": {"as_int": 1 << 40}}, r"Expected a storage of at least"),
        "dtype": ({"dtype": 99}, r"ScalarType|dtype"),
    }
    for label, (patch, message) in cases.items():
        doc = json.loads(json.dumps(config))
        doc["config"]["count"]["tensor_meta"].update(patch)
        dst = tmp_path / f"{label.replace(' ', '_')}.pt2"
        _rewrite(path, dst, {config_name: json.dumps(doc).encode()}, set())
        with pytest.raises(DecodeError, match=message):
            pt2.open(dst).tensors()


def test_misaligned_entry_is_refused(tmp_path: Path) -> None:
    from opwire.schema import models as m
    from opwire.serde._archive.mapping import TensorLayout, view_tensor

    buf = bytearray(64)
    layout = TensorLayout(int(m.ScalarType.FLOAT), [2], [1], 0, m.Device(type="cpu"))
    assert view_tensor(buf, 8, 8, layout, "w").shape == (2,)
    with pytest.raises(DecodeError, match="aligned to 4 bytes, got offset 3"):
        view_tensor(buf, 3, 8, layout, "w")
    with pytest.raises(DecodeError, match="inside the file"):
        view_tensor(buf, 60, 8, layout, "w")


def test_mmap_false_reads_private_copies(saved: tuple[Path, torch.export.ExportedProgram]) -> None:
    path, ep = saved
    archive = pt2.open(path, mmap=False)
    weights, _ = archive.tensors()
    assert archive._mapped is None
    assert torch.equal(weights["lin.weight"], ep.state_dict["lin.weight"].detach())


def test_truncated_file_is_refused_at_open(saved: tuple[Path, torch.export.ExportedProgram], tmp_path: Path) -> None:
    path, _ = saved
    cut = tmp_path / "cut.pt2"
    data = path.read_bytes()
    cut.write_bytes(data)
    archive = pt2.open(cut)
    cut.write_bytes(data[: len(data) // 2] + data[-(len(data) // 4) :])  # changed under us, before mapping
    with pytest.raises(DecodeError):
        archive.tensors()
