"""The `opwire` command: every subcommand registered, --help everywhere, usage errors exit 2."""

from __future__ import annotations

import argparse
import gc
import importlib
from pathlib import Path

import pytest
from support.clirun import run_cli, run_cli_fresh

from opwire.cli import COMMANDS, build_parser, main
from opwire.errors import DecodeError


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


def test_each_summary_in_the_table_is_the_help_its_module_registers() -> None:
    """`opwire --help` lists every command from `COMMANDS` without importing its module: the lines must agree."""
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    registered = {choice.dest: choice.help for choice in sub._choices_actions}
    assert registered == {name: command.summary for name, command in COMMANDS.items()}


@pytest.mark.parametrize("argv", [["--help"], ["inspect", "--help"], ["schema", "diff", "--help"], ["nope"], []])
def test_the_parser_of_one_command_reads_the_command_line_as_the_full_one(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """`main` registers only the chosen command in full: help, usage errors and the command list stay the same."""
    outputs = []
    for parser in (build_parser(), build_parser(only=argv[0] if argv else "")):
        with pytest.raises(SystemExit) as info:
            parser.parse_args(argv)
        outputs.append((info.value.code, capsys.readouterr()))
    assert outputs[0] == outputs[1]


_ARGV = {
    "inspect": ["inspect", "f"],
    "convert": ["convert", "f", "out.json"],
    "convert --allow-pickle": ["convert", "f", "out.json", "--allow-pickle"],  # unpickling runs the file's code
    "run": ["run", "f", "--inputs", "i"],
}


@pytest.mark.parametrize(
    ("command", "paused"), [("inspect", True), ("convert", True), ("convert --allow-pickle", False), ("run", False)]
)
def test_reading_commands_pause_the_collector_and_restore_it(
    command: str, paused: bool, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`inspect` and `convert` run no user code and build acyclic models: the collector's full passes over them are
    paused while they run and resumed after, on success and on error; `run` (user ops) keeps it running."""
    module = importlib.import_module(COMMANDS[command.split()[0]].module)
    seen: list[bool] = []

    def fake(args: argparse.Namespace) -> int:  # the first call returns, the second fails
        seen.append(gc.isenabled())
        if len(seen) == 2:
            raise DecodeError("bad: not a program")
        return 0

    monkeypatch.setattr(module, "run", fake)
    argv = _ARGV[command]
    assert gc.isenabled()
    for code in (0, 2):
        assert main(argv) == code
        assert gc.isenabled()  # resumed, whatever the command did
    assert seen == [not paused, not paused]
    assert "bad: not a program" in capsys.readouterr().err
    assert COMMANDS[command.split()[0]].pauses_collector is (command != "run")


def test_a_collector_the_host_disabled_stays_disabled() -> None:
    gc.disable()
    try:
        with pytest.raises(SystemExit):
            main(["inspect", "--help"])
        assert main(["schema", "diff", "missing-a.thrift", "missing-b.thrift"]) == 2
        assert not gc.isenabled()
    finally:
        gc.enable()


@pytest.mark.parametrize(
    ("command", "importing", "running"),
    [("inspect", False, False), ("convert --allow-pickle", False, True), ("run", True, True)],
)
def test_a_reading_command_pauses_the_collector_while_its_module_imports(
    command: str, importing: bool, running: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pause starts before the chosen command's module is imported (class creation allocates much and makes no
    cycles); `--allow-pickle` resumes it before the command runs, and a command that runs user code never pauses."""
    module = importlib.import_module(COMMANDS[command.split()[0]].module)
    real_import = importlib.import_module
    seen: dict[str, bool] = {}

    def spy(name: str, package: str | None = None) -> object:
        seen.setdefault("importing", gc.isenabled())
        return real_import(name, package)

    def fake(args: argparse.Namespace) -> int:
        seen["running"] = gc.isenabled()
        return 0

    monkeypatch.setattr(importlib, "import_module", spy)
    monkeypatch.setattr(module, "run", fake)
    assert main(_ARGV[command]) == 0
    assert gc.isenabled()
    assert seen == {"importing": importing, "running": running}
