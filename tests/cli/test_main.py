"""The `opwire` command: every subcommand registered, --help everywhere, usage errors exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.clirun import run_cli, run_cli_fresh

from opwire.cli import COMMANDS, build_parser, main


def test_every_command_is_registered() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert sorted(sub.choices) == sorted(COMMANDS)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "argv",
    [[], *[[c] for c in COMMANDS], ["schema", "diff"], ["ops", "validate"], ["ops", "snapshot"], ["ops", "bc-check"]],
)
def test_help_everywhere(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main([*argv, "--help"])
    assert info.value.code == 0
    assert capsys.readouterr().out.startswith("usage: opwire")


def test_missing_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main([])
    assert info.value.code == 2
    assert "the following arguments are required: COMMAND" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["--version"], ["inspect", "missing.pt2"], ["run"]])
def test_a_fresh_process_prints_what_the_forked_one_does(argv: list[str], tmp_path: Path) -> None:
    """The `cli` fixture forks commands from a server (tests/support/cli_forkserver.py): same output as a fresh start."""
    fresh, forked = run_cli_fresh(*argv, cwd=tmp_path), run_cli(*argv, cwd=tmp_path)
    assert (fresh.returncode, fresh.stdout, fresh.stderr) == (forked.returncode, forked.stdout, forked.stderr)
    assert fresh.stdout or fresh.stderr
