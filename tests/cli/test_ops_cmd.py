"""`opwire ops validate|snapshot|bc-check`: exit codes, output and errors (run in-process through main())."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import opwire
from opwire.cli import main
from opwire.schema import models as m
from opwire.validation.snapshot import load_snapshot, snapshot_from_schemas, snapshot_ops

OPLIB_DIR = str(Path(__file__).resolve().parents[1] / "validation")


@pytest.fixture(autouse=True)
def _oplib_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(OPLIB_DIR)


def test_validate_clean(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ops", "validate", "opwire_vt::good", "--import", "oplib.validate_lib"]) == 0
    out = capsys.readouterr().out
    assert "opwire_vt::good.default\n  schema: opwire_vt::good(Tensor x, SymInt n=2) -> Tensor\n" in out
    assert "  vmap: register_vmap (a vmap rule registered with register_vmap on the custom_op)\n" in out
    kernels = next(line for line in out.splitlines() if line.startswith("  kernels: "))
    assert "(computed)" not in kernels and " computed from them; --json lists every key)" in kernels
    assert out.endswith(
        "1 op: 0 errors, 0 warnings\n"
        "checks run: argument and return types an Argument member carries; types torch 2.13's AOTInductor proxy "
        "executor passes; kernels per dispatch key and a fake implementation; the vmap route\n"
        "  (--sample-inputs MODULE:FUNC adds torch.library.opcheck and a record/serialize/replay round trip)\n"
    )


def test_validate_errors_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ops", "validate", "opwire_vt::nofake", "opwire_vt::view_op", "--import", "oplib.validate_lib"]) == 1
    out = capsys.readouterr().out
    assert "  error no_fake_impl: opwire_vt::nofake.default: no fake implementation is registered;" in out
    assert "\n2 ops: 1 error, 1 warning\nchecks run: " in out


def test_validate_json_with_sample_inputs(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["ops", "validate", "opwire_vt::badfake", "--import", "oplib.validate_lib", "--json"]
    assert main([*argv, "--sample-inputs", "oplib.validate_lib:sample_inputs"]) == 1
    out = capsys.readouterr().out
    data = json.loads(out)
    assert data["errors"] == 1
    (report,) = data["reports"]
    assert [f["code"] for f in report["findings"]] == ["vmap_fallback", "opcheck_failed"]
    assert report["findings"][1]["severity"] == "error"
    parsed = opwire.loads(out, m.OpValidationOutput)  # the IDL's record, read back by the JSON codec
    assert parsed.reports[0].op_schema is not None and parsed.reports[0].op_schema.name == "opwire_vt::badfake"
    assert parsed.reports[0].findings[1] == m.Finding(**report["findings"][1])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["ops", "validate", "opwire_vt::nope", "--import", "oplib.validate_lib"],
            "opwire ops: error: no operator matches target 'opwire_vt::nope': expected a registered op, overload "
            "or namespace; load the library that defines it first (--import MODULE or --load-library PATH.so)",
        ),
        (
            ["ops", "validate", "x::y", "--import", "oplib.no_such_module"],
            "opwire ops: error: --import oplib.no_such_module: no module named 'oplib.no_such_module'; expected a "
            "module importable from the working directory or PYTHONPATH, or a file path (--import ./lib/mylib.py)",
        ),
        (
            ["ops", "validate", "opwire_vt::good", "--import", "oplib.validate_lib", "--sample-inputs", "nocolon"],
            "opwire ops: error: --sample-inputs expects MODULE:FUNC (e.g. mylib.samples:sample_inputs), got 'nocolon'",
        ),
    ],
)
def test_bad_usage_exit_2(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err == message + "\n"


def test_load_library_failure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bogus = tmp_path / "libnothing.so"
    bogus.write_bytes(b"not a shared library")
    assert main(["ops", "snapshot", "x", "--load-library", str(bogus)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"opwire ops: error: --load-library {bogus}: loading failed (")
    assert err.endswith("expected a shared library built against this torch that registers ops\n")
    assert err.count("\n") == 1


def test_snapshot_stdout_and_compact(tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    assert main(["ops", "snapshot", "opwire_bc", "--import", "oplib.bc_v2_live"]) == 0
    out = capsysbinary.readouterr().out
    assert opwire.loads(out, type(snapshot_ops("opwire_bc"))) == snapshot_ops("opwire_bc")
    doc = json.loads(out)
    assert out == (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode()  # reviewable: indented, sorted, newline
    path = tmp_path / "snap.bin"
    assert main(["ops", "snapshot", "opwire_bc", "--format", "compact", "--out", str(path)]) == 0
    assert load_snapshot(path) == snapshot_ops("opwire_bc")


def test_bc_check_live_and_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from oplib.bc_versions import V1, V2

    v1, v2 = tmp_path / "v1.json", tmp_path / "v2.json"
    v1.write_bytes(opwire.dumps(snapshot_from_schemas(V1)))
    v2.write_bytes(opwire.dumps(snapshot_from_schemas(V2)))
    assert main(["ops", "bc-check", str(v1), "--import", "oplib.bc_v2_live"]) == 1
    out = capsys.readouterr().out
    assert "error op_removed: opwire_bc::gone.default: the op was removed;" in out
    assert out.endswith("18 change(s), 13 breaking under FROM_SCHEMA\n")
    assert main(["ops", "bc-check", str(v2), str(v2), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["policy"], data["breaking"], data["changes"]) == ("FROM_SCHEMA", 0, [])
    assert all(v["backward_compatible"] and v["forward_compatible"] for v in data["torch"])
    assert main(["ops", "bc-check", str(v1), str(v2), "--json"]) == 1
    out = capsys.readouterr().out
    report = opwire.loads(out, m.BcCheckReport)  # the IDL's record, read back by the JSON codec
    assert (report.breaking, len(report.changes)) == (13, 18)
    gone = next(c for c in json.loads(out)["changes"] if c["code"] == "op_removed")
    assert set(gone) == {"code", "severity", "op", "message", "fix", "callers", "effects"}
    assert gone["effects"] == {
        "REQUIRE_SERIALIZED": "breaking",
        "REQUIRE_CALLER": "breaking",
        "FROM_SCHEMA": "breaking",
    }


@pytest.mark.parametrize(("policy", "code"), [("from_schema", 0), ("require_serialized", 1), ("require-caller", 1)])
def test_bc_check_exit_follows_policy(tmp_path: Path, policy: str, code: int) -> None:
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    old.write_bytes(opwire.dumps(snapshot_from_schemas(["opwire_bc::f(Tensor x) -> Tensor"])))
    new.write_bytes(opwire.dumps(snapshot_from_schemas(["opwire_bc::f(Tensor x, int n=1) -> Tensor"])))
    assert main(["ops", "bc-check", str(old), str(new), "--policy", policy]) == code


def test_bc_check_bad_policy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = tmp_path / "old.json"
    old.write_bytes(opwire.dumps(snapshot_from_schemas(["opwire_bc::f(Tensor x) -> Tensor"])))
    assert main(["ops", "bc-check", str(old), str(old), "--policy", "never"]) == 2
    assert capsys.readouterr().err.startswith("opwire ops: error: bc-check: unknown default policy 'never'")


@pytest.mark.parametrize("verb", ["validate", "snapshot", "bc-check"])
def test_help(verb: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["ops", verb, "--help"])
    assert info.value.code == 0
    assert "--import" in capsys.readouterr().out
