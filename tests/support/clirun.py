"""Running `opwire` in a child process, as a user does: the `cli` fixture of tests/conftest.py.

Each command runs in its own process: a fork of tests/support/cli_forkserver.py, a server (one per test worker) that
imported the CLI once, so a command costs what it does rather than torch's import. Commands that need
another environment or stdin start `python -m opwire.cli` from scratch; tests/cli/test_main.py and the
tests that check start-up itself always do. `run_module` forks a `torchrun` launcher the same way (its ranks start
fresh, as torchrun starts them, or, with `fork_ranks`, as forks of the launcher), and `run_python` a
`python -c CODE` child: a process of its own (torch's once-per-process state fresh, a crash kept out of the worker)
without another import of torch. A test about what an import loads still starts `python` from scratch (the server
has imported torch, Dynamo and the CLI).
"""

from __future__ import annotations

import atexit
import json
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["Cli", "one_line", "run_cli", "run_cli_fresh", "run_module", "run_python", "serve"]

Cli = Callable[..., "subprocess.CompletedProcess[str]"]

_SERVER = Path(__file__).with_name("cli_forkserver.py")
_lock = threading.Lock()
_state: dict[str, Any] = {}


def run_cli_fresh(*args: object, cwd: Path, timeout: float = 600, **kw: Any) -> subprocess.CompletedProcess[str]:
    """The finished `python -m opwire.cli ARGS` process started from scratch, run in `cwd` (text output)."""
    return subprocess.run(
        [sys.executable, "-m", "opwire.cli", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        **kw,
    )


def _server() -> subprocess.Popen[str]:
    proc: subprocess.Popen[str] | None = _state.get("proc")
    if proc is None or proc.poll() is not None:
        proc = subprocess.Popen(
            [sys.executable, str(_SERVER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1
        )
        assert proc.stdout is not None
        if json.loads(proc.stdout.readline() or "{}") != {"ready": True}:
            raise RuntimeError(f"the CLI fork server did not start (exit {proc.wait()})")
        _state.update(proc=proc, dir=Path(tempfile.mkdtemp(prefix="opwire-cli-")), n=0)
        atexit.register(shutil.rmtree, _state["dir"], True)
    return proc


def run_cli(
    *args: object, cwd: Path, timeout: float = 600, limit_as: int | None = None
) -> subprocess.CompletedProcess[str]:
    """The finished `opwire ARGS` process, run in `cwd` (text output), under RLIMIT_AS `limit_as` if given."""
    return _serve(["opwire"], [str(a) for a in args], {"cwd": str(cwd), "timeout": timeout, "limit_as": limit_as})


def run_module(
    module: str, *args: object, cwd: Path, env: dict[str, str], timeout: float = 600, fork_ranks: bool = False
) -> subprocess.CompletedProcess[str]:
    """The finished `python -m MODULE ARGS` process (e.g. `torch.distributed.run`, torchrun), run in `cwd` with `env`
    as its whole environment, forked from the server (torch already imported) rather than started from scratch;
    with `fork_ranks`, a torchrun launcher forks its ranks too (tests/support/forked_ranks.py)."""
    request = {"cwd": str(cwd), "timeout": timeout, "module": module, "env": env, "fork_ranks": fork_ranks}
    return _serve([sys.executable, "-m", module], [str(a) for a in args], request)


def run_python(
    code: str,
    *args: object,
    cwd: Path | str = ".",
    env: dict[str, str] | None = None,
    ignore_warnings: bool = False,
    timeout: float = 600,
) -> subprocess.CompletedProcess[str]:
    """The finished `python [-W ignore] -c CODE ARGS` process, run in `cwd` (in `env` as its whole environment when
    given), forked from the server: `__main__` is a namespace of its own, torch and the CLI are imported already."""
    request = {
        "cwd": str(Path(cwd).resolve()),
        "timeout": timeout,
        "code": code,
        "env": env,
        "ignore_warnings": ignore_warnings,
    }
    flags = ["-W", "ignore"] if ignore_warnings else []
    return _serve([sys.executable, *flags, "-c", code], [str(a) for a in args], request)


def serve(request: dict[str, Any]) -> dict[str, Any]:
    """Run one request (tests/support/cli_forkserver.py) in a child of this worker's fork server; the server's reply:
    {"returncode": N (minus the signal that killed it), "cpu": S} or {"timeout": True, "cpu": S}."""
    with _lock:
        proc = _server()
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps(request) + "\n")
        reply: dict[str, Any] = json.loads(proc.stdout.readline())
    return reply


def _serve(command: list[str], argv: list[str], request: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    """Send one request to this worker's fork server and wait for the child; its output and exit code."""
    with _lock:
        _server()
        _state["n"] += 1
        out, err = (_state["dir"] / f"{_state['n']}.{name}" for name in ("out", "err"))
    reply = serve({**request, "argv": argv, "out": str(out), "err": str(err)})
    stdout, stderr = (p.read_text(encoding="utf-8") for p in (out, err))
    out.unlink()
    err.unlink()
    if reply.get("timeout"):
        raise subprocess.TimeoutExpired([*command, *argv], request["timeout"], stdout, stderr)
    return subprocess.CompletedProcess([*command, *argv], reply["returncode"], stdout, stderr)


def one_line(proc: subprocess.CompletedProcess[str], command: str) -> str:
    """The one stderr line of a refused `opwire COMMAND` (no traceback, no terminal control characters)."""
    lines = proc.stderr.strip().splitlines()
    assert "Traceback" not in proc.stderr, proc.stderr
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"opwire {command}: error: "), lines[0]
    assert "\x1b" not in proc.stderr and "\u202e" not in proc.stderr and "\x07" not in proc.stderr
    return lines[0]
