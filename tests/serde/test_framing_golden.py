"""The framing header's bytes (docs/wire-format.md) must not drift: a golden file per codec."""

from __future__ import annotations

import pytest
from support.golden_bytes import check_golden

from opwire.schema import models as m
from opwire.serde import framing


@pytest.mark.parametrize("root", ["ExportedProgram", "CallTrace"])
def test_header_bytes_are_golden(codec: str, root: str) -> None:
    data = framing.write_header(codec, root)
    want = check_golden(f"framing/{root}.{codec}.hex", data)
    h = framing.read_header(want, "golden")
    version = m.SCHEMA_VERSION if root == "ExportedProgram" else m.RECORDS_VERSION
    assert (h.codec, h.root, h.version, h.offset) == (codec, root, version, len(want))
