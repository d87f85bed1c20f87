"""Hostile calls run in a child forked from the test process (torch already loaded, no interpreter start per call).

A crash is the child's signal and a hang its timeout, so a regression is a failed test, not a dead pytest.
`in_fork(code)` runs `code` after `PRELUDE`, whose `run(op, **values)` calls the op through
`ProxyExecutor.call` as a file's node would and prints "ran" or the KernelError.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time
import traceback
import warnings

__all__ = ["PRELUDE", "in_fork"]

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
