"""Hostile calls run in a child forked from the test process (torch already loaded, no interpreter start per call).

A crash is the child's signal and a hang its timeout, so a regression is a failed test, not a dead pytest.
`in_fork(code)` runs `code` after `PRELUDE`, whose `run(op, **values)` calls the op through
`ProxyExecutor.call` as a file's node would and prints "ran" or the KernelError. `Served(main, headroom_as)` is a
line-protocol fuzz worker (tests/proxy_executor/op_fuzz_worker.py, exec_fuzz_worker.py) forked the same way, with
what its `Popen` gave: pipes, `wait`, `kill`.
"""

from __future__ import annotations

import contextlib
import os
import resource
import select
import signal
import sys
import time
import traceback
import warnings
from collections.abc import Callable

__all__ = ["PRELUDE", "Served", "in_fork"]

PRELUDE = """
import torch
from support.op_call import call_node
from opwire.errors import KernelError
from opwire.proxy_executor import ProxyExecutor
def run(op, **values):
    node, env = call_node(op, **values)
    try:
        ProxyExecutor().call(node, env)
        print("ran")
    except KernelError as exc:
        print("KernelError", exc)
"""


def in_fork(code: str, timeout: float = 120.0) -> tuple[int, str]:
    """Run `PRELUDE` and `code` in a forked child; (its exit status or -signal, what it printed and raised)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: stdout and stderr into the pipe, and never back into pytest
        status = 0
        try:
            os.close(r)
            os.dup2(w, 1)
            os.dup2(w, 2)
            sys.stdout = sys.stderr = os.fdopen(1, "w", closefd=False)
            warnings.simplefilter("ignore")
            exec(compile(PRELUDE + code, "<hostile call>", "exec"), {})
        except BaseException:
            traceback.print_exc()
            status = 1
        finally:
            sys.stdout.flush()
            os._exit(status)
    os.close(w)
    out, deadline = b"", time.monotonic() + timeout
    try:
        while select.select([r], [], [], max(0.0, deadline - time.monotonic()))[0]:
            chunk = os.read(r, 65536)
            if not chunk:
                break
            out += chunk
        else:
            os.kill(pid, signal.SIGKILL)
    finally:
        os.close(r)
    _, status = os.waitpid(pid, 0)
    code_ = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    return code_, out.decode("utf-8", "replace")


def _mapped() -> int:
    """This process's address space in bytes."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


class Served:
    """`main()` in a child forked from this process, its stdin and stdout on pipes: what `Popen([python, "-W",
    "ignore", worker.py])` of a line-protocol worker gives (`stdin`, `stdout`, `poll`, `wait`, `kill`; `wait` is
    minus the signal that killed it), without the child's interpreter start and imports of torch and Dynamo.

    The child's address space is capped at its parent's plus `headroom_as` bytes, if given (a fresh worker capped at
    3 GiB had ~2.3 GiB left after its imports); stderr stays the parent's, warnings are ignored as `-W ignore` does, and
    the child never returns into the parent's code: it exits when `main` returns (0) or raises (1, traceback)."""

    def __init__(self, main: Callable[[], None], headroom_as: int | None) -> None:
        down_r, down_w = os.pipe()
        up_r, up_w = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            status = 0
            try:
                os.dup2(down_r, 0)
                os.dup2(up_w, 1)
                for fd in (down_r, down_w, up_r, up_w):
                    os.close(fd)
                if headroom_as is not None:
                    cap = _mapped() + headroom_as
                    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
                sys.stdin = open(0, encoding="utf-8", closefd=False)
                sys.stdout = open(1, "w", encoding="utf-8", closefd=False)
                sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False)
                warnings.simplefilter("ignore")
                main()
            except BaseException:
                traceback.print_exc()
                status = 1
            finally:
                with contextlib.suppress(Exception):
                    sys.stdout.flush()
                os._exit(status)
        os.close(down_r)
        os.close(up_w)
        self.pid, self.returncode = pid, None
        self.stdin = open(down_w, "w", encoding="utf-8")  # closed by kill()
        self.stdout = open(up_r, encoding="utf-8")

    def _reaped(self, status: int) -> int:
        self.returncode = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        return self.returncode

    def poll(self) -> int | None:
        """The child's exit code (minus its signal) once it has ended, else None."""
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self._reaped(status)
        return self.returncode

    def wait(self) -> int:
        """Wait for the child; its exit code, or minus the signal that killed it."""
        if self.returncode is None:
            self._reaped(os.waitpid(self.pid, 0)[1])
        assert self.returncode is not None
        return self.returncode

    def kill(self) -> None:
        """SIGKILL the child unless it was reaped already, and close the pipes."""
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
        for f in (self.stdin, self.stdout):
            with contextlib.suppress(OSError):
                f.close()
