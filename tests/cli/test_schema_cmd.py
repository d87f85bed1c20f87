"""`opwire schema diff`: exit 0 for none/minor, 1 for major, 2 for bad input; text and --json output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from opwire.cli import main

PAIRS = Path(__file__).parents[1] / "schema" / "idl_pairs"


def _run(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str, str]:
    rc = main(["schema", "diff", *map(str, argv)])
    out, err = capsys.readouterr()
    return rc, out, err


def test_major_change_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(capsys, PAIRS / "base.thrift", PAIRS / "field_removed.thrift")
    assert rc == 1
    assert out.splitlines() == [
        "major  field_removed           Point.y (id 20) was removed",
        "needs: major bump, 1 change",
    ]


def test_minor_change_exits_0_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(capsys, PAIRS / "base.thrift", PAIRS / "enum_value_added.thrift", "--json")
    assert rc == 0
    assert json.loads(out) == {
        "bump": "minor",
        "changes": [
            {"code": "enum_value_added", "bump": "minor", "where": "Color.BLUE", "message": "new value Color.BLUE = 3"}
        ],
    }


def test_doc_only_hidden_unless_all(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(capsys, PAIRS / "base.thrift", PAIRS / "doc_changed.thrift")
    assert rc == 0 and out.splitlines() == ["needs: none bump, 2 changes (2 more needing no bump; --all lists them)"]
    rc, out, _ = _run(capsys, PAIRS / "base.thrift", PAIRS / "doc_changed.thrift", "--all")
    assert rc == 0 and out.count("doc_changed") == 2


def test_bad_input_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = _run(capsys, PAIRS / "e_syntax.thrift", PAIRS / "base.thrift")
    assert rc == 2 and out == "" and err.count("\n") == 1
    assert err.startswith(f"opwire schema: error: {PAIRS / 'e_syntax.thrift'}: not a valid Thrift IDL")
    rc, _, err = _run(capsys, PAIRS / "absent.thrift", PAIRS / "base.thrift")
    assert rc == 2 and "no such IDL file" in err
