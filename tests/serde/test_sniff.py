"""Each container is sniffed in one place: the zip magic in archive.py, JSON and "header or object" in json.py."""

from __future__ import annotations

import pytest

from opwire.errors import DecodeError
from opwire.serde import framing, json
from opwire.serde.archive import is_zip_head


def test_a_zip_is_known_by_its_local_header_or_an_empty_zips_end_record() -> None:
    assert is_zip_head(b"PK\x03\x04rest") and is_zip_head(b"PK\x05\x06" + b"\0" * 18)
    assert not is_zip_head(b'{"values": {}}') and not is_zip_head(b"PK")


def test_a_document_is_opwires_header_or_a_json_object() -> None:
    assert json.is_document_head(framing.write_header("binary", "CallTrace") + b"\0")
    assert json.is_document_head(b' \n {"header": {}}')
    assert not json.is_document_head(b"[1, 2]")  # JSON, but no document opwire reads starts as an array
    assert not json.is_document_head(b"PK\x03\x04")


def test_the_json_top_names_the_codecs_depth_and_what_it_got() -> None:
    with pytest.raises(DecodeError, match=rf"deep.json: JSON nested too deeply.*stops at {json.JSON_PARSER_DEPTH}"):
        json.json_top(b"[" * 100_000 + b"]" * 100_000, "deep.json")
    with pytest.raises(DecodeError, match=r"x.json: expected a JSON object at the top level, got list"):
        json.json_top(b"[1]", "x.json")
    assert json.json_top(b"[1]", object_only=False) == [1]
    assert json.detect_json_root(b'{"values": {}}').__name__ == "Values"
