"""The one zip reader (opwire/serde/archive.py): STORED and DEFLATED only, bounded inflation, CRC checked,
and every path that opens a zip (.pt2, AOTInductor packages, detection, inspect) goes through it."""

from __future__ import annotations

import json
import zipfile
import zlib
from pathlib import Path

import pytest
from support.hostile import _raw_zip, patch_zip_entry

from opwire.serde import DecodeError
from opwire.serde.archive import ZipArchive, is_zip


def _zip(path: Path, entries: dict[str, bytes], method: int = zipfile.ZIP_DEFLATED) -> Path:
    with zipfile.ZipFile(path, "w", compression=method) as z:
        for name, data in entries.items():
            z.writestr(name, data)
    return path


def test_stored_and_deflated_entries_read_back(tmp_path: Path) -> None:
    data = b"hello " * 1000
    for method in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        p = _zip(tmp_path / f"ok{method}.zip", {"a": data, "b": b""}, method)
        with ZipArchive(p) as z:
            assert z.names() == ["a", "b"]
            assert z.read("a") == data
            assert z.read("b") == b""


@pytest.mark.parametrize(
    ("method", "message"),
    [(12, r"compression method 12 \(bzip2\)"), (14, r"method 14 \(LZMA\)"), (99, r"method 99"), (7, r"method 7")],
)
def test_other_methods_are_refused_before_reading(tmp_path: Path, method: int, message: str) -> None:
    p = _zip(tmp_path / "m.zip", {"a": b"x" * 100})
    patch_zip_entry(p, "a", method=method)
    with ZipArchive(p) as z, pytest.raises(DecodeError, match=message):
        z.read("a")


def test_encrypted_flag_is_refused(tmp_path: Path) -> None:
    p = _zip(tmp_path / "e.zip", {"a": b"x" * 100})
    patch_zip_entry(p, "a", flags=1)
    with ZipArchive(p) as z, pytest.raises(DecodeError, match=r"entry `a`: it is encrypted"):
        z.read("a")


def test_inflation_stops_at_the_declared_size(tmp_path: Path) -> None:
    data = b"\0" * (8 << 20)
    p = tmp_path / "liar.zip"
    _raw_zip(p, "archive/m.json", zlib.compress(data)[2:-4], 8, 1000, zlib.crc32(data))
    with ZipArchive(p) as z, pytest.raises(DecodeError, match="inflates past its declared size of 1000 bytes"):
        z.read("archive/m.json")


def test_ratio_and_total_budgets(tmp_path: Path) -> None:
    data = bytes(range(256)) * (1 << 14)  # 4 MiB at a ratio well below the default budget
    p = _zip(tmp_path / "r.zip", {"a": data, "b": data})
    with ZipArchive(p, max_ratio=10) as z, pytest.raises(DecodeError, match=r"exceeds the budget max_ratio=10"):
        z.read("a")
    with ZipArchive(p, max_bytes=6 << 20) as z:
        assert z.read("a") == data
        with pytest.raises(DecodeError, match=r"exceeds the budget max_bytes=6291456 .*pass a larger max_bytes="):
            z.read("b")


def test_corrupt_deflate_and_crc(tmp_path: Path) -> None:
    data = json.dumps({"k": list(range(2000))}).encode()
    raw = bytearray(zlib.compress(data)[2:-4])
    raw[10:20] = b"\xff" * 10
    p = tmp_path / "c.zip"
    _raw_zip(p, "archive/m.json", bytes(raw), 8, len(data), zlib.crc32(data))
    with ZipArchive(p) as z, pytest.raises(DecodeError, match=r"corrupt deflate data|CRC-32 mismatch|declared"):
        z.read("archive/m.json")
    q = tmp_path / "crc.zip"
    _raw_zip(q, "archive/m.json", zlib.compress(data)[2:-4], 8, len(data), 12345)
    with ZipArchive(q) as z, pytest.raises(DecodeError, match="CRC-32 mismatch"):
        z.read("archive/m.json")


def test_not_a_zip(tmp_path: Path) -> None:
    assert not is_zip("/dev/zero")
    assert not is_zip(tmp_path)
    bad = tmp_path / "x.zip"
    bad.write_bytes(b"PK\x03\x04garbage")
    assert not is_zip(bad)
    with pytest.raises(DecodeError, match="not a readable zip archive"):
        ZipArchive(bad)


def test_every_zip_path_uses_the_checked_reader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """zipfile's own entry reader (which inflates before checking) is never called by .pt2, AOTI or detection."""
    import opwire
    from opwire.proxy_executor.executor import load_extern_nodes
    from opwire.serde import pt2

    package = _zip(
        tmp_path / "aoti.pt2", {"p/data/aotinductor/model/abc.wrapper.json": json.dumps({"nodes": []}).encode()}
    )
    program = tmp_path / "prog.pt2"
    from support.hostile import _base_pt2

    program.write_bytes(_base_pt2())

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("zipfile's entry reader was used")

    monkeypatch.setattr(zipfile.ZipFile, "open", refuse)
    monkeypatch.setattr(zipfile.ZipFile, "read", refuse)
    assert load_extern_nodes(package).nodes == []
    assert opwire.open(package, expect="extern_nodes").nodes == []
    assert pt2.read(program).program.graph_module.graph.nodes
    assert opwire.open(program, expect="program").program.graph_module.graph.nodes
