"""Findings files: the opwire document and `ops validate --json` are read; everything else is a DecodeError."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from opwire.errors import DecodeError
from opwire.schema import models as m
from opwire.view.overlays import (
    FORMAT_VERSION,
    findings_document,
    findings_json,
    load_findings,
    merge_findings,
    op_target,
)


def _write(tmp_path: Path, doc: Any, name: str = "f.json") -> Path:
    p = tmp_path / name
    p.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return p


def test_document_keyed_by_node_and_op(tmp_path: Path) -> None:
    diff = m.NodeDifference(output="addmm", kind="value", max_diff=0.5, max_rel=0.1, where=[0, 1], shape=[2, 3])
    doc = findings_document(
        [
            m.Finding(
                code="node_mismatch",
                severity="error",
                node="addmm",
                message="differs",
                differences=[diff],
                origin="inherited",
            ),
            m.Finding(code="node_match", severity="ok", node="relu", message="matches", fix="nothing to do"),
            m.Finding(code="x1", severity="warning", op="opwire_test::scale", message="m", fix="f"),
        ],
        "my run",
        "addmm",
    )
    p = tmp_path / "f.json"
    p.write_bytes(findings_json(doc))
    assert json.loads(p.read_text())["opwire_findings"] == FORMAT_VERSION == 2
    got = load_findings(p)
    assert got["title"] == "my run" and got["first"] == "addmm" and got["count"] == 3
    addmm = got["nodes"]["addmm"][0]
    assert addmm["severity"] == "error" and addmm["code"] == "node_mismatch" and '"max_diff": 0.5' in addmm["detail"]
    assert addmm["origin"] == "inherited" and "origin" not in got["nodes"]["relu"][0]
    assert got["nodes"]["relu"] == [
        {"severity": "ok", "code": "node_match", "message": "matches", "fix": "nothing to do"}
    ]
    assert got["targets"] == {
        "torch.ops.opwire_test.scale.default": [
            {"severity": "warning", "code": "x1", "message": "m", "fix": "f"},
        ]
    }


def test_version_1_documents_still_load(tmp_path: Path) -> None:
    """What the previous release wrote: `status` (mismatch -> error), `target`, free-form `detail`, upper-case codes."""
    doc = {
        "opwire_findings": 1,
        "title": "old run",
        "first_divergence": "addmm",
        "findings": [
            {
                "node": "addmm",
                "status": "mismatch",
                "code": "NODE_MISMATCH",
                "message": "d",
                "detail": {"max_diff": 0.5},
            },
            {"node": "relu", "status": "ok", "message": "matches"},
            {"target": "opwire_test::scale", "status": "warning", "code": "X1", "message": "m", "fix": "f"},
        ],
    }
    got = load_findings(_write(tmp_path, doc))
    assert got["title"] == "old run" and got["first"] == "addmm" and got["count"] == 3
    assert got["nodes"]["addmm"][0]["severity"] == "error" and '"max_diff": 0.5' in got["nodes"]["addmm"][0]["detail"]
    assert got["nodes"]["relu"][0]["severity"] == "ok"
    assert got["targets"]["torch.ops.opwire_test.scale.default"][0] == {
        "severity": "warning",
        "code": "X1",
        "message": "m",
        "fix": "f",
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
    assert got["targets"]["torch.ops.ns.foo.out"][0]["severity"] == "error"


def test_op_target() -> None:
    assert op_target("aten::add.Tensor") == "torch.ops.aten.add.Tensor"
    assert op_target("ns::op") == "torch.ops.ns.op.default"
    assert op_target("torch.ops.ns.op.default") == "torch.ops.ns.op.default"


def test_merge() -> None:
    a = {"title": "a", "first": None, "nodes": {"x": [{"severity": "ok"}]}, "targets": {}, "count": 1}
    b = {"title": "b", "first": "y", "nodes": {"x": [{"severity": "error"}]}, "targets": {"t": []}, "count": 1}
    got = merge_findings([a, b])
    assert got is not None and got["title"] == "a + b" and got["first"] == "y" and len(got["nodes"]["x"]) == 2
    assert merge_findings([]) is None


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ("{", "a findings file must be JSON"),
        ("[" * 100000, "nested too deeply"),
        ([1], "expected an opwire findings document"),
        ({"opwire_findings": 3, "findings": []}, "findings format version 3 is not one this opwire reads"),
        ({"opwire_findings": True, "findings": []}, "findings format version True is not one"),
        ({"opwire_findings": 2, "findings": {}}, "`findings`"),
        ({"opwire_findings": 2, "findings": [3]}, "`findings[0]`"),
        ({"opwire_findings": 2, "findings": [{"code": "c", "message": "m"}]}, "`findings[0].severity`"),
        ({"opwire_findings": 2, "findings": [{"code": "c", "severity": "ok", "message": 3}]}, "`findings[0].message`"),
        (
            {"opwire_findings": 2, "findings": [{"code": "c", "severity": "bad", "message": "m", "node": "n"}]},
            "`findings[0].severity` to be one of error, warning, info, ok",
        ),
        (
            {"opwire_findings": 2, "findings": [{"code": "c", "severity": "ok", "message": "m"}]},
            "`findings[0]` to name a 'node' or an 'op'",
        ),
        ({"opwire_findings": 2, "first_divergence": 3, "findings": []}, "`first_divergence`"),
        ({"opwire_findings": 2, "title": [], "findings": []}, "`title`"),
        ('{"opwire_findings": 2, "findings": [], "title": ' + "[" * 300 + "]" * 300 + "}", "nesting deeper than"),
        ({"opwire_findings": 1, "findings": {}}, "expected 'findings' to be a list"),
        ({"opwire_findings": 1, "findings": [3]}, "expected an object at `findings[0]`"),
        ({"opwire_findings": 1, "findings": [{"node": "a", "status": "bad"}]}, "`findings[0].status` to be one of"),
        ({"opwire_findings": 1, "findings": [{"status": "ok"}]}, "to name a 'node' or an 'op'"),
        (
            {"opwire_findings": 1, "findings": [{"node": "a", "status": "ok", "message": 3}]},
            "a string at `findings[0].message`",
        ),
        ({"opwire_findings": 1, "first_divergence": 3, "findings": []}, "'first_divergence' to be a node name"),
        ({"opwire_findings": 1, "title": [], "findings": []}, "a string at `title`"),
        ({"reports": {}}, "expected 'reports' to be a list"),
        ({"reports": [{"op": 1}]}, "`reports[0]` to have an 'op' and a 'findings' list"),
        ({"reports": [{"op": "a::b", "findings": [1]}]}, "an object at `reports[0].findings[0]`"),
        (
            {"reports": [{"op": "a::b", "findings": [{"severity": "fatal"}]}]},
            "`reports[0].findings[0].severity` to be one of error, warning, info, ok",
        ),
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
