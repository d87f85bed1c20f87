"""The `opwire` command: every subcommand registered, --help everywhere, usage errors exit 2."""

from __future__ import annotations

import pytest

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
