"""Report objects print what the CLI prints: `str(OpReport)` / `format_reports` is `opwire ops validate`'s text,
`str(BcReport)` is `opwire ops bc-check`'s."""

from __future__ import annotations

from pathlib import Path

import oplib.validate_lib  # noqa: F401  (registers the opwire_vt ops)
import pytest
from oplib.bc_versions import V1, V2

import opwire
from opwire.cli import main
from opwire.proxy_executor.default_policy import DefaultPolicy
from opwire.validation.snapshot import snapshot_from_schemas
from opwire.validation.validate import checks_run, format_reports


def test_op_report_text() -> None:
    (report,) = opwire.validate_op("opwire_vt::nofake")
    text = str(report)
    lines = text.splitlines()
    assert lines[0] == "opwire_vt::nofake.default"
    assert lines[1].startswith("  schema: opwire_vt::nofake(")
    assert lines[2].startswith("  kernels: ")
    assert "  fake impl: none" in lines
    (finding,) = [f for f in report.findings if f.code == "no_fake_impl"]
    assert f"  error no_fake_impl: {finding.message}\n    fix: {finding.fix}" in text
    assert str(finding) == f"error no_fake_impl: {finding.message}\n  fix: {finding.fix}"
    assert not text.endswith("\n")


def test_ops_validate_prints_the_reports_text(capsys: pytest.CaptureFixture[str]) -> None:
    targets = ["opwire_vt::good", "opwire_vt::nofake", "opwire_vt::view_op"]
    assert main(["ops", "validate", *targets, "--import", "oplib.validate_lib"]) == 1
    out = capsys.readouterr().out
    reports = [r for t in targets for r in opwire.validate_op(t)]
    assert out == format_reports(reports, checks_run(with_samples=False)) + "\n"
    assert out.startswith("\n".join(map(str, reports)) + "\n3 ops: 1 error, 1 warning\nchecks run: ")


def test_bc_report_text_is_what_bc_check_prints(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old, new = tmp_path / "v1.json", tmp_path / "v2.json"
    old.write_bytes(opwire.dumps(snapshot_from_schemas(V1)))
    new.write_bytes(opwire.dumps(snapshot_from_schemas(V2)))
    for policy in DefaultPolicy:
        report = opwire.bc_check(old, new, policy=policy)
        main(["ops", "bc-check", str(old), str(new), "--policy", policy.value])
        assert capsys.readouterr().out == str(report) + "\n"
    text = str(opwire.bc_check(old, new))
    first = text.splitlines()[:3]
    assert first[0].startswith("info argument_added_with_default: opwire_bc::add_def.default: new argument 'n'")
    assert first[1] == (
        "    callers: compatible; files under REQUIRE_SERIALIZED: breaking, REQUIRE_CALLER: breaking, "
        "FROM_SCHEMA: compatible"
    )
    assert first[2].startswith("    fix: replay old REQUIRE_SERIALIZED files with policy FROM_SCHEMA")
    assert text.endswith("\n18 change(s), 13 breaking under FROM_SCHEMA")


def test_bc_report_without_changes() -> None:
    snap = snapshot_from_schemas(["opwire_bc::f(Tensor x) -> Tensor"])
    assert str(opwire.bc_check(snap, snap)) == "0 change(s), 0 breaking under FROM_SCHEMA"
