"""schema_diff over hand-made IDL pairs (tests/schema/idl_pairs), torch's IDL vs ours, and README sync."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import opwire
from opwire.errors import DecodeError
from opwire.schema.diff import RULES, SchemaChange, load_idl, required_bump, schema_diff

PAIRS = Path(__file__).parent / "idl_pairs"
BASE = PAIRS / "base.thrift"
SCHEMA_DIR = Path(opwire.__file__).parent / "schema"

# case file (a change of base.thrift) -> the (code, where) pairs the diff must report, nothing else
EXPECTED: dict[str, set[tuple[str, str]]] = {
    "field_removed": {("field_removed", "Point.y")},
    "id_reused": {("field_id_reused", "Point.y")},
    "id_changed": {("field_id_changed", "Point.y")},
    "type_changed": {("field_type_changed", "Point.y"), ("field_type_changed", "Canvas.shapes")},
    "requiredness_changed": {("requiredness_changed", "Point.label"), ("requiredness_changed", "Point.x")},
    "required_field_added": {("required_field_added", "Point.z")},
    "optional_field_added": {("optional_field_added", "Point.z"), ("optional_field_added", "Point.w")},
    "enum_value_removed": {("enum_value_removed", "Color.GREEN")},
    "enum_value_renumbered": {("enum_value_renumbered", "Color.GREEN")},
    "enum_value_renamed": {("enum_value_renamed", "Color.GREEN")},
    "enum_value_added": {("enum_value_added", "Color.BLUE")},
    "union_member_removed": {("union_member_removed", "Shape.as_radius")},
    "union_member_added": {("union_member_added", "Shape.as_name")},
    "type_added": {("type_added", "Caption")},
    "type_removed": {("type_removed", "Canvas")},
    "type_kind_changed": {("type_kind_changed", "Shape")},
    "doc_changed": {("doc_changed", "Color"), ("doc_changed", "Point.x")},
    "default_changed": {("default_changed", "Point.tags")},
    "default_added": {("default_added", "Point.y")},
    "field_order_changed": {("field_order_changed", "Point")},
}
BUMP = {
    "type_added": "minor",
    "optional_field_added": "minor",
    "enum_value_added": "minor",
    "union_member_added": "minor",
    "default_added": "minor",
    "doc_changed": "none",
    "field_order_changed": "none",
}


def _found(changes: list[SchemaChange]) -> set[tuple[str, str]]:
    return {(c.code, c.where) for c in changes}


def test_every_case_file_has_an_expectation() -> None:
    files = {p.stem for p in PAIRS.glob("*.thrift")} - {"base"}
    assert {f for f in files if not f.startswith("e_")} == set(EXPECTED)


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_pair(case: str) -> None:
    changes = schema_diff(BASE, PAIRS / f"{case}.thrift")
    assert _found(changes) == EXPECTED[case]
    assert required_bump(changes) == BUMP.get(case, "major")
    for c in changes:
        assert c.bump == RULES[c.code][0] and c.where in c.message


REVERSED = {
    "field_removed": {"required_field_added"},
    "enum_value_added": {"enum_value_removed"},
    "union_member_added": {"union_member_removed"},
    "type_added": {"type_removed"},
}


@pytest.mark.parametrize("case", sorted(REVERSED))
def test_reverse_direction(case: str) -> None:
    """Undoing a change gives its mirror: an addition read backwards is a removal, and the reverse."""
    back = schema_diff(PAIRS / f"{case}.thrift", BASE)
    assert {c.code for c in back} == REVERSED[case]


def test_identical_and_text_input() -> None:
    assert schema_diff(BASE, BASE) == []
    text = BASE.read_text()
    assert schema_diff(text, text.replace("GREEN = 2,", "GREEN = 2,\n  BLUE = 3,")) == [
        SchemaChange("enum_value_added", "minor", "Color.BLUE", "new value Color.BLUE = 3")
    ]


def test_includes_are_read_per_side() -> None:
    """Both sides include a `common.thrift`: each must see its own (thriftpy2 caches by file name)."""
    changes = schema_diff(PAIRS / "inc_old" / "main.thrift", PAIRS / "inc_new" / "main.thrift")
    assert _found(changes) == {("optional_field_added", "Meta.owner")}


@pytest.mark.parametrize("name", sorted(p.name for p in PAIRS.glob("e_*.thrift")))
def test_bad_idl_is_a_decode_error(name: str) -> None:
    with pytest.raises(DecodeError, match=rf"^{re.escape(str(PAIRS / name))}: not a valid Thrift IDL"):
        schema_diff(PAIRS / name, BASE)


def test_missing_file_and_bad_text() -> None:
    with pytest.raises(DecodeError, match="no such IDL file"):
        load_idl(PAIRS / "nope.thrift")
    with pytest.raises(DecodeError, match=r"^IDL text: not a valid Thrift IDL"):
        load_idl("struct X {\n 10: Nope y;\n}\n")


def test_torch_idl_against_ours_has_no_contradiction() -> None:
    import torch._export.serde as torch_serde

    torch_idl = Path(torch_serde.__file__).parent / "export_schema.thrift"
    changes = schema_diff(torch_idl, SCHEMA_DIR / "export_schema.thrift")
    assert required_bump(changes) != "major", [c for c in changes if c.bump == "major"]
    assert {c.code for c in changes} <= {"doc_changed", "const_changed", "default_added"}


def test_public_name() -> None:
    assert opwire.schema_diff is schema_diff


def test_readme_table_matches_rules() -> None:
    """opwire/schema/README.md lists exactly RULES: same codes, bumps and wording."""
    rows = re.findall(r"^\| `(\w+)` \| (\w+) \| (.+?) \|$", (SCHEMA_DIR / "README.md").read_text(), re.M)
    assert {code: (bump, text) for code, bump, text in rows} == RULES
