"""Findings files: the opwire document and `ops validate --json` are read; everything else is a DecodeError."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from opwire.errors import DecodeError
from opwire.view.overlays import findings_document, load_findings, merge_findings, op_target


def _write(tmp_path: Path, doc: Any, name: str = "f.json") -> Path:
    p = tmp_path / name
    p.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return p


def test_document_keyed_by_node_and_target(tmp_path: Path) -> None:
    doc = findings_document(
        [
            {"node": "addmm", "status": "mismatch", "message": "differs", "detail": {"max_diff": 0.5}},
            {"node": "relu", "status": "ok", "message": "matches"},
            {"target": "opwire_test::scale", "status": "warning", "code": "X1", "message": "m", "fix": "f"},
        ],
        "my run",
        "addmm",
    )
    got = load_findings(_write(tmp_path, doc))
    assert got["title"] == "my run" and got["first"] == "addmm" and got["count"] == 3
    assert got["nodes"]["addmm"][0]["status"] == "mismatch" and '"max_diff": 0.5' in got["nodes"]["addmm"][0]["detail"]
    assert got["targets"] == {
        "torch.ops.opwire_test.scale.default": [
            {"status": "warning", "code": "X1", "message": "m", "fix": "f"},
        ]
    }


def test_ops_validate_json_applies_to_the_op(tmp_path: Path) -> None:
    doc = {
        "errors": 1,
        "reports": [
            {
                "op": "ns::foo.out",
                "findings": [{"code": "E1", "severity": "error", "op": "ns::foo.out", "message": "m", "fix": "f"}],
            },
            {"op": "ns::bar", "findings": []},
        ],
    }
    got = load_findings(_write(tmp_path, doc))
    assert list(got["targets"]) == ["torch.ops.ns.foo.out"]
    assert got["targets"]["torch.ops.ns.foo.out"][0]["status"] == "error"


def test_op_target() -> None:
    assert op_target("aten::add.Tensor") == "torch.ops.aten.add.Tensor"
    assert op_target("ns::op") == "torch.ops.ns.op.default"
    assert op_target("torch.ops.ns.op.default") == "torch.ops.ns.op.default"


def test_merge() -> None:
    a = {"title": "a", "first": None, "nodes": {"x": [{"status": "ok"}]}, "targets": {}, "count": 1}
    b = {"title": "b", "first": "y", "nodes": {"x": [{"status": "error"}]}, "targets": {"t": []}, "count": 1}
    got = merge_findings([a, b])
    assert got is not None and got["title"] == "a + b" and got["first"] == "y" and len(got["nodes"]["x"]) == 2
    assert merge_findings([]) is None


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ("{", "a findings file must be JSON"),
        ("[" * 100000, "nested too deeply"),
        ([1], "expected an opwire findings document"),
        ({"opwire_findings": 2, "findings": []}, "findings format version 2 is not one this opwire reads"),
        ({"opwire_findings": 1, "findings": {}}, "expected 'findings' to be a list"),
        ({"opwire_findings": 1, "findings": [3]}, "expected an object at `findings[0]`"),
        ({"opwire_findings": 1, "findings": [{"node": "a", "status": "bad"}]}, "`findings[0].status` to be one of"),
        ({"opwire_findings": 1, "findings": [{"status": "ok"}]}, "to name a 'node' or a 'target'"),
        (
            {"opwire_findings": 1, "findings": [{"node": "a", "status": "ok", "message": 3}]},
            "a string at `findings[0].message`",
        ),
        ({"opwire_findings": 1, "first_divergence": 3, "findings": []}, "'first_divergence' to be a node name"),
        ({"opwire_findings": 1, "title": [], "findings": []}, "a string at `title`"),
        ({"reports": {}}, "expected 'reports' to be a list"),
        ({"reports": [{"op": 1}]}, "`reports[0]` to have an 'op' and a 'findings' list"),
        ({"reports": [{"op": "a::b", "findings": [1]}]}, "an object at `reports[0].findings[0]`"),
        ({"reports": [{"op": "a::b", "findings": [{"severity": "fatal"}]}]}, "to be one of mismatch"),
    ],
)
def test_bad_findings_files(tmp_path: Path, doc: Any, message: str) -> None:
    with pytest.raises(DecodeError, match=None) as info:
        load_findings(_write(tmp_path, doc))
    assert message in str(info.value)


def test_missing_findings_file(tmp_path: Path) -> None:
    with pytest.raises(DecodeError, match="cannot read findings file"):
        load_findings(tmp_path / "nope.json")


def test_findings_file_past_the_size_limit(tmp_path: Path) -> None:
    p = tmp_path / "big.json"
    with p.open("wb") as f:
        f.write(b"{")  # starts like JSON, so only the byte budget stops it
        f.truncate((256 << 20) + 1)  # sparse: nothing more is written
    with pytest.raises(DecodeError, match="268435456"):
        load_findings(p)
