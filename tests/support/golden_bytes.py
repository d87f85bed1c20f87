"""Golden files for byte layouts that must not drift: a hexdump on disk, a unified diff on failure."""

from __future__ import annotations

import difflib
import os
from pathlib import Path

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


def hexdump(data: bytes) -> str:
    """Sixteen bytes a line, as hex pairs."""
    return "".join(f"{data[i : i + 16].hex(' ')}\n" for i in range(0, len(data), 16))


def undump(text: str) -> bytes:
    """The bytes of a hexdump."""
    return bytes.fromhex(text.replace("\n", " "))


def check_golden(name: str, data: bytes) -> bytes:
    """Assert `data` equals golden file `name` (OPWIRE_REGEN_GOLDEN=1 rewrites it); return the golden bytes."""
    path = GOLDEN / name
    got = hexdump(data)
    if os.environ.get("OPWIRE_REGEN_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(got)
    want = path.read_text()
    diff = "".join(difflib.unified_diff(want.splitlines(True), got.splitlines(True), str(path), "written now"))
    assert got == want, f"bytes drifted from {path.name} (set OPWIRE_REGEN_GOLDEN=1 only if intended):\n{diff}"
    return undump(want)
