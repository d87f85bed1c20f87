"""torchrun's ranks forked from its launcher, which the CLI fork server forked (torch imported), not started fresh.

`install()`, in a launcher (`torch.distributed.run`) forked from tests/support/cli_forkserver.py, makes the agent
start each rank whose command is `python -u -m MODULE ARGS` or `python -u SCRIPT ARGS` (what torchrun builds) as a
fork of the launcher instead of a fresh interpreter: a rank then costs its run, not three imports of torch and one
of Dynamo (~4 CPU-s a rank). The rank is a real child of the agent (a `Popen` whose child was forked, not
exec'd): torchrun polls, signals and reaps it as it would a fresh one, in a session of its own, its stdout and
stderr where torchrun sends them, unbuffered (`-u`). The child runs as a fresh interpreter would: the agent's
atexit handlers dropped and its signal handlers reset, the rank's whole environment in `os.environ`, `sys.argv`
and `sys.path[0]` set as `python` sets them (PYTHONPATH after it), `__main__` the module or script; it exits the
way an interpreter does (a `SystemExit` code, or the traceback of an uncaught exception and 1, then the atexit
handlers). Any other command (another executable) starts as torchrun starts it.

The launcher's threads (its rendezvous keep-alive timer, its store's server) are not in the fork; the rank never
touches their objects (it connects to the store as a client, as a fresh rank does). The launcher's other open
files (its store's listening socket) stay open in the rank, unused, where a fresh rank would have them closed. What a fresh interpreter has
not imported yet the rank has: the tests that check a fresh rank's start (test_dist_run's recording) start ranks
fresh.
"""

from __future__ import annotations

import atexit
import io
import os
import runpy
import signal
import subprocess
import sys
import traceback
from collections.abc import Callable
from typing import Any, TextIO

__all__ = ["ForkedRank", "exit_as_interpreter", "install"]


def _python_command(args: list[str]) -> tuple[str, str, list[str]] | None:
    """("module", MODULE, ARGS) or ("path", SCRIPT, ARGS) for `python -u [-m] TARGET ARGS`; None for anything else."""
    if not args or args[0] != sys.executable:
        return None
    rest = args[1:]
    while rest and rest[0] == "-u":
        rest = rest[1:]
    if len(rest) >= 2 and rest[0] == "-m":
        return "module", rest[1], rest[2:]
    if rest and not rest[0].startswith("-"):
        return "path", rest[0], rest[1:]
    return None


def _run_rank(kind: str, what: str, argv: list[str], env: dict[str, str]) -> int:
    """Run the rank's `python -u` command in this forked process; its exit code."""
    atexit._clear()  # the agent's handlers: a fresh interpreter has none
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.environ.clear()
    os.environ.update(env)
    # -u: unbuffered binary layers, text written through (the agent's streams, which loggers it configured may
    # still hold, are flushed at exit)
    inherited = (sys.stdout, sys.stderr)
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8", write_through=True)
    sys.stderr = io.TextIOWrapper(
        io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace", write_through=True
    )
    extra = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    first = os.path.dirname(os.path.abspath(what)) if kind == "path" else os.getcwd()
    sys.path[0:1] = [first, *extra]
    sys.argv = [what if kind == "path" else "-m", *argv]
    if kind == "path":
        return exit_as_interpreter(lambda: runpy.run_path(what, run_name="__main__") and None, inherited)
    return exit_as_interpreter(lambda: runpy.run_module(what, run_name="__main__", alter_sys=True) and None, inherited)


def exit_as_interpreter(main: Callable[[], int | None], streams: tuple[TextIO, ...] = ()) -> int:
    """Run `main` and end as an interpreter ends: its exit code (`main`'s, a `SystemExit`'s, or 1 after printing an
    uncaught exception's traceback), once the atexit handlers have run and `streams` and sys's are flushed."""
    code = 1
    try:
        code = main() or 0
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
    try:
        atexit._run_exitfuncs()
    finally:
        for stream in (*streams, sys.stdout, sys.stderr):
            stream.flush()
    return code


class ForkedRank(subprocess.Popen):  # type: ignore[type-arg]
    """A `Popen` of `python -u [-m] TARGET ARGS` whose child is a fork of this process running TARGET, not an exec."""

    def _execute_child(self, args: Any, executable: Any, preexec_fn: Any, close_fds: Any, pass_fds: Any,
                       cwd: Any, env: Any, startupinfo: Any, creationflags: Any, shell: Any,
                       p2cread: int, p2cwrite: int, c2pread: int, c2pwrite: int, errread: int, errwrite: int,
                       *rest: Any) -> None:  # fmt: skip
        command = None if shell or executable else _python_command([str(a) for a in args])
        if command is None or p2cread != -1 or c2pread != -1 or errread != -1:  # pipes: as torchrun starts it
            super()._execute_child(  # type: ignore[misc]
                args, executable, preexec_fn, close_fds, pass_fds, cwd, env, startupinfo, creationflags, shell,
                p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite, *rest,
            )  # fmt: skip
            return
        start_new_session = rest[-2]  # (..., start_new_session, process_group)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                if start_new_session:
                    os.setsid()
                for fd, target in ((c2pwrite, 1), (errwrite, 2)):
                    if fd != -1 and fd != target:
                        os.dup2(fd, target)
                if cwd is not None:
                    os.chdir(cwd)
                code = _run_rank(*command, env=dict(env if env is not None else os.environ))
            finally:
                os._exit(code & 0xFF)
        self.pid = pid
        self._child_created = True


def _rank_popen(self: Any, args: tuple[str, ...], env: dict[str, str]) -> subprocess.Popen[bytes]:
    """torchrun's `SubprocessHandler._popen`, starting a `ForkedRank`."""
    return ForkedRank(args=args, env=env, stdout=self._stdout, stderr=self._stderr, start_new_session=True)


def install() -> None:
    """Make this torchrun launcher fork its ranks (call before `torch.distributed.run` starts them)."""
    from torch.distributed.elastic.multiprocessing.subprocess_handler import subprocess_handler

    subprocess_handler.SubprocessHandler._popen = _rank_popen  # type: ignore[method-assign]
