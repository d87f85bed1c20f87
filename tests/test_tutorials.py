"""Every tutorial in docs/tutorials/ runs as written, in an empty directory, block by block.

- ```python blocks run in one namespace, in order (a block after `<!-- file: NAME -->` is written to NAME
  instead: the files a reader creates, such as an op library);
- ```console blocks run each `$ opwire ...` line as a reader types it, through `opwire.cli.main` (in a child
  process when the block follows `<!-- fresh process -->`: after the reader edited a library already loaded);
  the lines after a command are its complete output (stdout, then stderr), and it must exit 0 (or N, with
  `# exit N`). Both sides are normalised first for what may drift without anything being wrong: timings,
  the reader's directory, torch and opwire versions, digests, a launcher's run id, a written file's size
  (`normalise`).

`OPWIRE_UPDATE_TUTORIALS=1 pytest tests/test_tutorials.py` rewrites each console block with the output the
commands print now (review the diff before committing it).
"""

from __future__ import annotations

import contextlib
import difflib
import io
import os
import re
import shlex
import sys
from pathlib import Path

import pytest
from support import inductor
from support.clirun import run_cli, run_module

TUTORIALS = Path(__file__).resolve().parents[1] / "docs" / "tutorials"
_BLOCK = re.compile(
    r"(?:<!-- (?:file: (?P<file>\S+)|(?P<fresh>fresh process)) -->\s*\n)?```(?P<lang>\w+)\n(?P<body>.*?)```", re.S
)
_SLOW = {"aoti-extern-nodes.md"}  # compiles with AOTInductor (with the suite's settings: tests/support/inductor.py)
_DISTRIBUTED = {"debug-a-distributed-run.md"}  # launches torchrun with 2 gloo ranks
_ENV = re.compile(r"[A-Z_][A-Z0-9_]*=\S*")


def _in_process(argv: list[str]) -> tuple[int, str]:
    from opwire.cli import main

    out, err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8"), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse
            code = int(exc.code or 0)
    out.flush()
    return code, out.buffer.getvalue().decode() + err.getvalue()  # type: ignore[attr-defined]


_UPDATE = os.environ.get("OPWIRE_UPDATE_TUTORIALS") == "1"
_VOLATILE = [
    (re.compile(r"\b\d+\.\d+ ?s\b"), "<T>s"),  # timings: 0.44s, 1.2 s
    (re.compile(r"\b(torch|opwire)( version)?:? \d+\.\d+(\.\d+)?([.+-]\w+)*"), r"\1\2 <version>"),
    (re.compile(r"\b\d+\.\d+\.\d+\+\w+\b"), "<version>"),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "<run id>"),
    (re.compile(r"\b[0-9a-f]{16,}\b"), "<hex>"),
    (re.compile(r"/tmp/\S*?/(?=[^/\s]+)"), "./"),
    # a written file's size: an exported program keeps stack traces that name torch's install directory
    (re.compile(r"\b(as \w+, )\d+ bytes\b"), r"\1<N> bytes"),
]


def normalise(text: str, cwd: Path) -> list[str]:
    """Output lines with what may drift replaced by placeholders (and trailing blanks dropped)."""
    text = text.replace(str(cwd) + os.sep, "").replace(str(cwd), ".")
    for pattern, repl in _VOLATILE:
        text = pattern.sub(repl, text)
    return [line.rstrip() for line in text.rstrip().splitlines()]


def _run_console(body: str, cwd: Path, where: str, fresh: bool) -> str:
    """Run the block's commands, check each prints exactly what the block shows; the block as it is now."""
    commands: list[tuple[str, list[str]]] = []
    for line in body.splitlines():
        if line.startswith("$ "):
            commands.append((line[2:], []))
        elif commands:
            commands[-1][1].append(line.rstrip())
    now: list[str] = []
    for command, expected in commands:
        text, _, note = command.partition("#")
        want = int(note.split()[1]) if note.strip().startswith("exit") else 0
        argv = shlex.split(text)
        env: dict[str, str] = {}
        while argv and _ENV.fullmatch(argv[0]):  # `NAME=value command`, as a shell reads it
            key, _, value = argv.pop(0).partition("=")
            env[key] = value
        if argv[0] == "torchrun":
            code, output = _torchrun(argv[1:], cwd, env)
            assert code == want, f"{where}: `{command}` exited {code}:\n{output[-4000:]}"
            for line in expected:
                assert line.strip() in output, f"{where}: `{command}` did not print {line!r}; it printed:\n{output}"
            now += [f"$ {command}", *expected]  # shown as written: the lines a launcher's output must contain
            continue
        assert argv[0] == "opwire", f"{where}: only opwire commands run in the tutorials, got {command!r}"
        if fresh:
            done = run_cli(*argv[1:], cwd=cwd)
            code, output = done.returncode, done.stdout + done.stderr
        else:
            code, output = _in_process(argv[1:])
        assert code == want, f"{where}: `{command}` exited {code}:\n{output}"
        got = normalise(output, cwd)
        now += [f"$ {command}", *(output.replace(str(cwd) + os.sep, "").replace(str(cwd), ".").rstrip().splitlines())]
        if not _UPDATE:
            shown = normalise("\n".join(expected), cwd)
            assert got == shown, (
                f"{where}: `{command}` printed other output than the tutorial shows (OPWIRE_UPDATE_TUTORIALS=1 "
                f"rewrites it):\n" + "\n".join(difflib.unified_diff(shown, got, "tutorial", "printed", lineterm=""))
            )
    return "\n".join(line.rstrip() for line in now) + "\n"


def _torchrun(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, str]:
    """A `torchrun` line as the reader types it (this checkout's opwire first on the path), bounded in time: the
    launcher is forked from the CLI fork server (torch imported once per worker), and it forks the ranks
    (tests/support/forked_ranks.py; test_dist_run records with ranks started fresh)."""
    full = {**os.environ, **env, "OMP_NUM_THREADS": "1"}
    root = str(Path(__file__).resolve().parents[1])
    full["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [full.get("PYTHONPATH")])])
    done = run_module("torch.distributed.run", *argv, cwd=cwd, env=full, timeout=600, fork_ranks=True)
    return done.returncode, done.stdout + done.stderr


def _run(doc: Path, cwd: Path) -> int:
    namespace: dict[str, object] = {"__name__": f"tutorial_{doc.stem.replace('-', '_')}"}
    count = 0
    source = doc.read_text()
    updated: list[tuple[int, int, str]] = []
    for match in _BLOCK.finditer(source):
        where = f"{doc.name}:{source[: match.start()].count(chr(10)) + 1}"
        lang, body, name = match["lang"], match["body"], match["file"]
        if name:
            (cwd / name).write_text(body)
        elif lang == "python":
            exec(compile(body, where, "exec"), namespace)  # our own documentation
        elif lang == "console":
            updated.append(
                (match.start("body"), match.end("body"), _run_console(body, cwd, where, bool(match["fresh"])))
            )
        count += 1
    if _UPDATE:
        for start, end, text in reversed(updated):
            source = source[:start] + text + source[end:]
        doc.write_text(source)
    return count


def _tutorials() -> list[object]:
    return [
        pytest.param(p, marks=[pytest.mark.slow, pytest.mark.distributed], id=p.stem)
        if p.name in _DISTRIBUTED
        else pytest.param(p, marks=pytest.mark.slow, id=p.stem)
        if p.name in _SLOW
        else pytest.param(p, id=p.stem)
        for p in sorted(TUTORIALS.glob("*.md"))
    ]


@pytest.mark.parametrize("doc", _tutorials())
def test_tutorial_runs_as_written(doc: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))  # the reader's own modules import, as from their working directory
    saved = sys.argv[:]
    try:
        with inductor.settings() if doc.name in _SLOW else contextlib.nullcontext():
            assert _run(doc, tmp_path) >= 3
    finally:
        sys.argv = saved


def test_there_is_a_tutorial_per_job() -> None:
    assert {p.stem for p in TUTORIALS.glob("*.md")} == {
        "serialize-and-move",
        "validate-custom-ops",
        "record-and-replay",
        "aoti-extern-nodes",
        "debug-a-distributed-run",
    }


def test_updating_a_block_keeps_its_torchrun_lines(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`OPWIRE_UPDATE_TUTORIALS=1` rewrites a block from what `_run_console` returns: a torchrun line and the output
    it shows must be in it (they were dropped, so an update deleted every `$ torchrun` line of a tutorial)."""
    monkeypatch.setattr(
        sys.modules[__name__], "_torchrun", lambda argv, cwd, env: (0, "W launcher noise\n-> run/r.t\n")
    )
    body = "$ torchrun --nproc-per-node 2 -m opwire record --out run -- t.py\n-> run/r.t\n"
    assert _run_console(body, tmp_path, "t.md:1", False) == body
