"""Small CLI fixes: record's checks and tracebacks, one finding per root cause, and --help that explains the files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.clirun import Cli

from opwire.cli import COMMANDS, build_parser, main

SAMPLES = """
import torch

def two(op):
    return [((torch.randn(3),), {}), ((torch.randn(2, 2),), {})]
"""

SCRIPT = """
import torch

def step():
    torch.ones(3).sum()
    raise ValueError("the loss went NaN")

step()
"""


def _validate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, op: str, capsys: pytest.CaptureFixture[str]) -> dict:
    (tmp_path / "samples12.py").write_text(SAMPLES)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "validation"))  # oplib
    argv = ["ops", "validate", op, "--import", "oplib.validate_lib", "--sample-inputs", "samples12:two", "--json"]
    main(argv)
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


def test_no_fake_impl_is_one_finding_not_one_per_opcheck_test(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _validate(tmp_path, monkeypatch, "opwire_vt::nofake", capsys)
    errors = [f for f in out["reports"][0]["findings"] if f["severity"] == "error"]
    assert [f["code"] for f in errors] == ["no_fake_impl"]
    assert (
        errors[0]["fix"]
        == 'register one with @nofake.register_fake or torch.library.register_fake("opwire_vt::nofake")'
    )
    assert "torch.library.opcheck on the sample inputs" in out["checks"]


def test_a_wrong_fake_impl_is_one_finding_for_all_samples(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _validate(tmp_path, monkeypatch, "opwire_vt::badfake", capsys)
    (f,) = [f for f in out["reports"][0]["findings"] if f["code"] == "opcheck_failed"]
    assert f["message"].startswith(
        "opwire_vt::badfake.default: torch.library.opcheck test_faketensor failed on samples 0 and 1 (the error of "
        "sample 0): MetadataMismatchError: "
    )
    assert f["fix"] == "make the fake implementation (register_fake) return the real kernel's output sizes and strides"


def test_an_unrepresentable_default_is_not_reported_again_by_the_round_trip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _validate(tmp_path, monkeypatch, "opwire_vt::none_default", capsys)
    codes = [f["code"] for f in out["reports"][0]["findings"] if f["severity"] == "error"]
    assert codes == ["unrepresentable_default"]
    (f,) = [f for f in out["reports"][0]["findings"] if f["code"] == "unrepresentable_default"]
    assert "`int? n=None`" in f["fix"]


def test_record_checks_out_before_running_the_script(tmp_path: Path, cli: Cli) -> None:
    (tmp_path / "train.py").write_text("open('ran', 'w').write('yes')\n")
    done = cli("record", "--out", "no/such/dir/t.trace", "--", "python", "train.py")
    assert done.returncode == 2
    assert done.stderr == (
        "opwire record: error: --out no/such/dir/t.trace: cannot write the trace there (No such file or "
        "directory); the script did not run\n"
    )
    assert not (tmp_path / "ran").exists()


def test_record_shows_the_scripts_own_traceback(tmp_path: Path, cli: Cli) -> None:
    (tmp_path / "train.py").write_text(SCRIPT)
    done = cli("record", "--out", "t.trace", "--", "python", "train.py")
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert lines[:2] == ["Traceback (most recent call last):", '  File "train.py", line 8, in <module>']
    assert '  File "train.py", line 6, in step' in lines
    assert "ValueError: the loss went NaN" in lines
    assert "runpy" not in done.stderr and "opwire/cli" not in done.stderr
    assert lines[-1].startswith("recorded ") and (tmp_path / "t.trace").exists()


def test_record_names_itself_in_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["record", "--out", str(tmp_path / "x.trace"), "--", "ls"]) == 2
    assert capsys.readouterr().err == (
        "opwire record: error: expected `-- python SCRIPT.py [ARGS]` or `-- python -m MODULE [ARGS]`, got -- ls; "
        "the script runs in this process so it can be recorded\n"
    )
    assert main(["record", "--out", "/proc/no/x.trace", "--", "python", __file__]) == 2
    assert capsys.readouterr().err.startswith("opwire record: error: --out /proc/no/x.trace: cannot write the trace")


def _subcommands() -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    for name in COMMANDS:
        if name == "ops":
            out += [("ops", "validate"), ("ops", "snapshot"), ("ops", "bc-check")]
        elif name == "schema":
            out.append(("schema", "diff"))
        else:
            out.append((name,))
    return out


@pytest.mark.parametrize("command", _subcommands(), ids=" ".join)
def test_every_help_says_what_its_files_are_and_how_to_make_them(command: tuple[str, ...]) -> None:
    parser = build_parser()
    sub = parser._subparsers._group_actions[0].choices[command[0]]  # type: ignore[union-attr]
    if len(command) > 1:
        sub = sub._subparsers._group_actions[0].choices[command[1]]
    text = " ".join(sub.format_help().split())
    makers = ("torch.export.save", "opwire ", "opwire.", "torch.library", ".thrift", "Path(")
    assert any(m in text for m in makers), f"{' '.join(command)} --help does not say how to make its input files"
    assert "Exit 0" in text, f"{' '.join(command)} --help does not give its exit codes"
