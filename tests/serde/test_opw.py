"""The .opw archive: mapped tensors, identical storages stored once, aliases, CRC on demand, the byte layout
docs/wire-format.md gives (golden), .pt2 -> .opw -> .pt2 lossless and loadable by torch, and refused corruptions."""

from __future__ import annotations

import ctypes
import json as _stdlib_json
import mmap
import struct
import zlib
from pathlib import Path

import pytest
import torch
from support.clirun import Cli
from torch import nn

import opwire
from opwire.errors import DecodeError
from opwire.schema import models as m
from opwire.serde import opw, pt2, tensors
from opwire.serde._archive import opw_table

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "opw" / "tiny.opw.hex"


def _fresh(path: Path, x: torch.Tensor) -> torch.Tensor:
    """torch's output from a fresh load (an ExportedProgram's module mutates the program's own buffers)."""
    return torch.export.load(path).module()(x)


class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)
        with torch.no_grad():
            self.b.weight.copy_(self.a.weight)  # same values, separate tensors: stored once, loaded apart
        self.tied = self.a.bias  # one tensor under two names: an alias
        self.tw = nn.Parameter(torch.randn(4, 4).t())
        self.register_buffer("count", torch.zeros(4))
        self.const = torch.arange(8.0)[2:6]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.count.add_(1)
        return self.b(self.a(x)) @ self.tw + self.count + self.const + self.tied


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, torch.export.ExportedProgram]:
    torch.manual_seed(0)
    ep = torch.export.export(_Net(), (torch.randn(2, 4),))
    d = tmp_path_factory.mktemp("opw")
    torch.export.save(ep, d / "net.pt2")
    with pt2.open(d / "net.pt2") as archive:
        opw.write(archive, d / "net.opw")
    return d / "net.pt2", d / "net.opw", ep


def test_tensors_are_mapped_views(files: tuple[Path, Path, torch.export.ExportedProgram]) -> None:
    _, path, ep = files
    archive = opw.open(path)
    weights, constants = archive.tensors()
    assert archive._file is not None and isinstance(archive._file.buffer, mmap.mmap)
    lo = ctypes.addressof(ctypes.c_char.from_buffer(archive._file.buffer))
    assert lo <= weights["a.weight"].data_ptr() < lo + archive.size
    assert weights["a.weight"].data_ptr() % 64 == 0
    for name, t in [*weights.items(), *constants.items()]:
        ref = ep.state_dict.get(name, ep.constants.get(name))
        assert ref is not None and torch.equal(t, ref.detach()) and t.stride() == ref.stride(), name


def test_dedup_and_aliases(files: tuple[Path, Path, torch.export.ExportedProgram]) -> None:
    _, path, _ = files
    archive = opw.open(path)
    table = archive.table
    blob_of = {n: b for n, (b, _) in table.tensors["weights"].items()}
    assert blob_of["a.weight"] == blob_of["b.weight"]  # identical bytes, one blob
    aliases = table.aliases["weights"]  # torch stored them as one tensor: one name is an alias of the other
    assert aliases in ({"tied": "weights/a.bias"}, {"a.bias": "weights/tied"})
    weights, _ = archive.tensors()
    assert weights["a.weight"].data_ptr() != weights["b.weight"].data_ptr()  # separate tensors stay separate
    with torch.no_grad():
        weights["b.weight"].add_(1)
    assert not torch.equal(weights["a.weight"], weights["b.weight"])
    assert weights["tied"].data_ptr() == weights["a.bias"].data_ptr()


def test_run_program_and_file_untouched(files: tuple[Path, Path, torch.export.ExportedProgram]) -> None:
    src, path, _ = files
    before = path.read_bytes()
    x = torch.randn(2, 4)
    expected = _fresh(src, x)
    assert torch.allclose(opwire.run_program(opw.open(path), (x,)), expected)
    assert torch.allclose(opwire.run_program(path, (x,)), expected)
    assert path.read_bytes() == before


def test_pt2_opw_pt2_is_lossless_and_torch_loads_it(
    files: tuple[Path, Path, torch.export.ExportedProgram], tmp_path: Path
) -> None:
    src, path, _ = files
    original = pt2.read(src)
    back = opw.read(path)
    assert back.program == original.program
    assert back.weights.keys() == original.weights.keys() and back.constants.keys() == original.constants.keys()
    for kind in ("weights", "constants"):
        for name, tv in getattr(original, kind).items():
            other = getattr(back, kind)[name]
            assert (other.data, other.sizes, other.strides, other.storage_offset, other.dtype) == (
                tv.data,
                tv.sizes,
                tv.strides,
                tv.storage_offset,
                tv.dtype,
            ), name
    out = tmp_path / "back.pt2"
    pt2.write(back, out)
    x = torch.randn(2, 4)
    assert torch.allclose(torch.export.load(out).module()(x), _fresh(src, x))


def test_compact_archive_and_opwire_archive_write_the_same(
    files: tuple[Path, Path, torch.export.ExportedProgram], tmp_path: Path
) -> None:
    src, path, _ = files
    again = tmp_path / "again.opw"
    opw.write(opw.open(path), again)
    assert opw.read(again).weights.keys() == opw.read(path).weights.keys()
    written = tmp_path / "from_archive.opw"
    opw.write(pt2.read(src), written)
    assert opw.read(written).program == opw.read(path).program


def test_verify_on_demand(files: tuple[Path, Path, torch.export.ExportedProgram], tmp_path: Path) -> None:
    _, path, _ = files
    archive = opw.open(path)
    archive.verify()
    bad = tmp_path / "bad.opw"
    data = bytearray(path.read_bytes())
    blob = archive.table.blobs[-1]
    data[archive.header.data_offset + blob.offset] ^= 0xFF
    bad.write_bytes(bytes(data))
    opw.open(bad).tensors()  # nothing is checked up front
    with pytest.raises(DecodeError, match=r"blob \d+ fails its CRC-32"):
        opw.open(bad).verify()
    with pytest.raises(DecodeError, match=r"fails its CRC-32"):
        opw.open(bad, verify=True).tensors()


def test_mmap_false(files: tuple[Path, Path, torch.export.ExportedProgram]) -> None:
    _, path, ep = files
    weights, _ = opw.open(path, mmap=False).tensors()
    assert torch.equal(weights["a.weight"], ep.state_dict["a.weight"].detach())


# ------------------------------------------------------------------------------------------ golden layout
def _tiny_archive() -> m.OpwireArchive:
    """A fixed two-tensor archive (one aliased name) around the hostile tables' one-node program."""
    from support.hostile import base_program_json

    from opwire.serde import json

    program = json.decode(base_program_json(), m.ExportedProgram)
    for node in program.graph_module.graph.nodes:
        node.metadata = {}  # stack traces name the checkout's path: the golden bytes must not depend on it
    w = tensors.from_tensor(torch.arange(4, dtype=torch.float32))
    c = tensors.from_tensor(torch.tensor([1, 2, 3], dtype=torch.int64))
    return m.OpwireArchive(program=program, weights={"w": w, "w2": w}, constants={"c": c}, opwire_version="")


def test_golden_layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bytes docs/wire-format.md describes; regenerate with OPWIRE_REGEN_GOLDEN=1 after a deliberate change."""
    import os

    monkeypatch.setattr(opw, "__version__", "0.0.0-golden")  # the version opw.write stamps
    path = tmp_path / "tiny.opw"
    opw.write(_tiny_archive(), path)
    data = path.read_bytes()
    magic, version, flags, t_off, t_len, d_off, d_len, crc, r1, r2 = opw_table.HEADER.unpack_from(data)
    assert (magic, version, flags, t_off, r1, r2) == (b"\x89OPW\r\n\x1a\n", 1, 0, 64, 0, 0)
    assert d_off % 64 == 0 and d_off + d_len == len(data) and zlib.crc32(data[64 : 64 + t_len]) == crc
    assert set(data[64 + t_len : d_off]) <= {0}
    table = _stdlib_json.loads(data[64 : 64 + t_len])
    assert table["weights"]["w2"] == {"alias": "weights/w"}
    for off, length, blob_crc in table["blobs"]:
        assert off % 64 == 0 and zlib.crc32(data[d_off + off : d_off + off + length]) == blob_crc
    w = table["weights"]["w"]
    assert data[d_off + table["blobs"][w["blob"]][0] :][:16] == struct.pack("<4f", 0, 1, 2, 3)
    if os.environ.get("OPWIRE_REGEN_GOLDEN"):
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(data.hex("\n", -32) + "\n")
    expected = bytes.fromhex(GOLDEN.read_text().replace("\n", ""))
    if data != expected:
        import difflib

        diff = difflib.unified_diff(
            expected.hex("\n", -32).splitlines(), data.hex("\n", -32).splitlines(), "golden", "written", lineterm=""
        )
        pytest.fail("the .opw bytes drifted from tests/golden/opw/tiny.opw.hex:\n" + "\n".join(list(diff)[:40]))


# ------------------------------------------------------------------------------------------ refused files
def _patched_table(path: Path, dst: Path, edit: object) -> Path:
    """`path` with its table edited by `edit(table)` and the header's length and CRC fixed up to match."""
    data = path.read_bytes()
    _, _, _, _, t_len, d_off, d_len, _, _, _ = opw_table.HEADER.unpack_from(data)
    table = _stdlib_json.loads(data[64 : 64 + t_len])
    edit(table)  # type: ignore[operator]
    raw = _stdlib_json.dumps(table).encode()
    new_off = (64 + len(raw) + 63) // 64 * 64
    header = opw_table.pack_header(opw_table.Header(64, len(raw), new_off, d_len, zlib.crc32(raw)))
    dst.write_bytes(header + raw + b"\0" * (new_off - 64 - len(raw)) + data[d_off:])
    return dst


def _first_weight(table: dict[str, object]) -> dict[str, object]:
    weights = table["weights"]
    assert isinstance(weights, dict)
    return next(v for v in weights.values() if "blob" in v)


@pytest.mark.parametrize(
    ("label", "edit", "at_open", "message"),
    [
        ("overlap", lambda t: t["blobs"][2].__setitem__(0, t["blobs"][1][0]), True, "overlaps the previous blob"),
        ("past end", lambda t: t["blobs"][-1].__setitem__(1, 1 << 40), True, "run past the data section"),
        ("misaligned", lambda t: t["blobs"][1].__setitem__(0, t["blobs"][1][0] + 4), True, "not aligned to 64"),
        ("bad index", lambda t: _first_weight(t).__setitem__("blob", 999), True, r"expected an integer in \[0, "),
        ("negative", lambda t: _first_weight(t).__setitem__("offset", -1), True, r"expected an integer in \[0, "),
        ("alias cycle", lambda t: t["weights"].update(x={"alias": "weights/y"}, y={"alias": "weights/x"}), True, "chains and cycles"),
        ("alias missing", lambda t: t["weights"].update(x={"alias": "weights/nope"}), True, "does not hold"),
        ("extra key", lambda t: _first_weight(t).__setitem__("evil", 1), True, "expected the keys"),
        ("huge sizes", lambda t: _first_weight(t).__setitem__("sizes", [1 << 40, 1 << 40]), False, "Expected as many strides|64 bits|storage of at least"),
        ("dtype size", lambda t: _first_weight(t).__setitem__("dtype", int(m.ScalarType.DOUBLE)), False, "storage of at least|a multiple"),
        ("unknown dtype", lambda t: _first_weight(t).__setitem__("dtype", 999), False, "ScalarType"),
        ("storage offset", lambda t: _first_weight(t).__setitem__("offset", 1 << 50), False, "storage of at least"),
    ],
)  # fmt: skip
def test_hostile_tables_are_refused(
    files: tuple[Path, Path, torch.export.ExportedProgram], tmp_path: Path, label: str, edit: object, at_open: bool,
    message: str,
) -> None:  # fmt: skip
    _, path, _ = files
    bad = _patched_table(path, tmp_path / "bad.opw", edit)
    if at_open:
        with pytest.raises(DecodeError, match=message):
            opw.open(bad)
    else:
        archive = opw.open(bad)
        with pytest.raises(DecodeError, match=message):
            archive.tensors()


def test_truncated_and_bad_headers(files: tuple[Path, Path, torch.export.ExportedProgram], tmp_path: Path) -> None:
    _, path, _ = files
    data = path.read_bytes()
    cases = {
        "short": (data[:40], "too short for the 64-byte"),
        "truncated": (data[:-100], "the file is truncated"),
        "trailing": (data + b"x", "trailing bytes"),
        "version": (data[:8] + struct.pack("<I", 9) + data[12:], "version 9"),
        "table crc": (data[:64] + bytes([data[64] ^ 1]) + data[65:], "fails its CRC-32"),
        "data misaligned": (
            data[:32] + struct.pack("<Q", struct.unpack_from("<Q", data, 32)[0] + 1) + data[40:],
            "not aligned to 64",
        ),
    }
    for label, (raw, message) in cases.items():
        bad = tmp_path / f"{label}.opw"
        bad.write_bytes(raw)
        with pytest.raises(DecodeError, match=message):
            opw.open(bad)
    assert not opw.is_opw("/dev/zero") and not opw.is_opw(tmp_path)


def test_file_changed_while_open_is_refused(
    files: tuple[Path, Path, torch.export.ExportedProgram], tmp_path: Path
) -> None:
    _, path, _ = files
    copy = tmp_path / "copy.opw"
    copy.write_bytes(path.read_bytes())
    archive = opw.open(copy)
    archive.tensors()
    copy.write_bytes(path.read_bytes()[:100])  # truncated under the mapping: a fresh mapping is refused
    with pytest.raises(DecodeError, match="changed while open"):
        archive.tensors()


def test_cli_convert_and_inspect_verify(
    files: tuple[Path, Path, torch.export.ExportedProgram], cli: Cli, tmp_path: Path
) -> None:
    """`opwire convert IN OUT.opw` (and back to .pt2) and `opwire inspect --verify`, as a user runs them."""
    src, _, _ = files
    opw_path, back = tmp_path / "m.opw", tmp_path / "back.pt2"
    done = cli("convert", src, opw_path)
    assert done.returncode == 0 and f"wrote {opw_path}: OpwireArchive as opw" in done.stdout, done.stderr
    done = cli("convert", opw_path, back)
    assert done.returncode == 0, done.stderr
    x = torch.randn(2, 4)
    assert torch.allclose(torch.export.load(back).module()(x), _fresh(src, x))
    done = cli("inspect", opw_path, "--verify")
    assert done.returncode == 0 and "opw archive" in done.stdout and "every blob's CRC-32 matches" in done.stdout
    done = cli("inspect", src, "--verify")
    assert done.returncode == 0 and "every entry's CRC-32 matches" in done.stdout, done.stderr
    data = bytearray(opw_path.read_bytes())
    data[-1] ^= 0xFF
    opw_path.write_bytes(bytes(data))
    assert cli("inspect", opw_path).returncode == 0  # nothing read beyond the table and the program
    done = cli("inspect", opw_path, "--verify")
    assert done.returncode == 2 and "fails its CRC-32" in done.stderr and len(done.stderr.splitlines()) == 1
