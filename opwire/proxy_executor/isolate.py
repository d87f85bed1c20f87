"""Run a file's work in a sandboxed child process and bring its results back as bytes.

`run_in_child(work, limits)` forks (`spawn`). The child (torch already imported, the parent's loaded libraries
and registered ops inherited) first confines itself (`sandbox.confine`: no terminal, only the descriptors it
is given, stdout/stderr into a pipe, Landlock), then calls `work(child)`: the work loads what it needs, calls
`child.ready()` (which applies `sandbox.enter(limits)`: address space, CPU time, the seccomp allowlist on every
thread) once its inputs are loaded, says which node runs with `child.at(label)` before each, and returns named
byte strings (or a program's `Values`, a replay's `ReplayWorkerReport`). The child sends them, or the error that
stopped it, as one `IsolatedResult` record (`isolate_result`); the parent reads it through a pipe within the
memory budget, never unpickling, and decodes it strictly; it prints the child's stderr, escaped and bounded
(`child_stderr`). What the child says it is running sits in a shared page, so a crash (SIGSEGV, SIGABRT, SIGBUS),
a limit (CPU time, wall time), a malformed reply or a failure the child reports comes back as one opwire error
naming it.

Forking is cheap (no second interpreter, no second torch import). OpenMP's thread pool does not survive a
fork once it has run parallel work, so a child whose parent may have (the Python API's) runs its kernels
on `Limits.threads` threads (1); the CLI forks before any parallel work and keeps torch's default.
"""

from __future__ import annotations

import faulthandler
import gc
import mmap
import os
import select
import signal
import struct
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal, TypeVar

from opwire.errors import BudgetError, KernelError, OpwireError, describe_exception
from opwire.proxy_executor.child_stderr import ChildStderr
from opwire.proxy_executor.isolate_result import (
    Outcome,
    Reply,
    build_reply_models,
    decode_result,
    encode_result,
    error_record,
    oversized_error,
    rebuild,
    reply_budget,
)
from opwire.proxy_executor.sandbox import Limits, confine, enter, preload
from opwire.schema import models as m

__all__ = [
    "Child", "Outcome", "Spawned", "in_process", "kill", "run_in_child", "signal_error", "spawn", "timeout_error",
]  # fmt: skip

Work = Callable[["Child"], Reply]
"""A child's work: it loads what it needs, calls `child.ready()`, and returns what the parent reads back."""
T = TypeVar("T")

_SIGNALS: dict[int, str] = {
    signal.SIGSEGV: "a segmentation fault (SIGSEGV)",
    signal.SIGBUS: "a bus error (SIGBUS)",
    signal.SIGABRT: "an abort (SIGABRT)",
    signal.SIGILL: "an illegal instruction (SIGILL)",
    signal.SIGFPE: "an arithmetic fault (SIGFPE)",
    signal.SIGSYS: "a forbidden system call (SIGSYS)",
    signal.SIGKILL: "SIGKILL (the kernel's out-of-memory killer, or another process)",
}
_PAGE = 4096
_LOADING = 60.0  # wall seconds loading and binding may take at least (then the run's own timeout starts)


class Child:
    """The child's side: `ready()` enters the sandbox, `at(label)` says what runs (shared with the parent)."""

    def __init__(self, page: mmap.mmap | None, limits: Limits | None) -> None:
        self._page = page
        self._limits = limits
        self.label = "loading the inputs"

    def at(self, label: str) -> None:
        """Record that `label` (e.g. "graph node 'mm' (aten::mm.default)") runs next."""
        self.label = label
        if self._page is not None:
            data = label.encode("utf-8", "replace")[: _PAGE - 8]
            self._page[1:5] = struct.pack("<I", len(data))
            self._page[5 : 5 + len(data)] = data

    def explain(self, exc: BaseException) -> OpwireError:
        """The opwire error to report for `exc` raised by the file's work (memory exhaustion as the memory budget,
        a refused system call as the sandbox's refusal); unchanged outside a sandbox."""
        if self._page is None:
            return exc if isinstance(exc, OpwireError) else KernelError(describe_exception(exc))
        return rebuild(self.error(exc))

    def error(self, exc: BaseException) -> m.IsolatedError:
        """The error record the child sends for `exc` raised while running `self.label`."""
        return error_record(exc, self.label, self._limits)

    def ready(self) -> None:
        """Inputs are loaded and bound: apply the limits and the filter; from here on it is the file's work."""
        if self._page is not None and self._limits is not None:
            enter(self._limits)
            self._page[0] = 1


def in_process(work: Callable[[Child], T]) -> T:
    """Run `work` here, unsandboxed (`--no-isolate`, trusted files)."""
    return work(Child(None, None))


def run_in_child(work: Work, limits: Limits, keep: Iterable[int] = ()) -> Outcome:
    """Fork, run `work(child)` in the child under `limits`, and return what it sent (or the one error).

    `keep`: descriptors the child keeps (files the parent opened for it); every other one is closed there."""
    spawned = spawn(work, limits, keep)
    pid, page, r, er = spawned.pid, spawned.page, spawned.result, spawned.stderr
    data, finished = b"", False
    ended: Ended = "interrupted"
    stderr = ChildStderr()
    try:
        data, ended = _read_all(r, er, limits, page, stderr)
        finished = ended == "closed" and bool(data)
    finally:
        os.close(r)
        if not finished:  # out of time, too much output, or interrupted: the child goes now
            kill(pid)
    _, status = os.waitpid(pid, 0)
    stderr.drain(er)
    os.close(er)
    running, label = spawned.running(), spawned.label()
    page.close()
    if ended == "timeout":
        return Outcome({}, timeout_error(label, limits), running)
    if ended == "oversized":
        return Outcome({}, oversized_error(label, reply_budget(limits)), running)
    if os.WIFSIGNALED(status):
        return Outcome({}, signal_error(os.WTERMSIG(status), label, limits), running)
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 4 and not data:
        return Outcome({}, KernelError("the isolated child could not enter its sandbox (see its stderr above)"), False)
    return decode_result(data, label, running)


@dataclass
class Spawned:
    """A forked, confined child: its pid, the shared page (entered flag, running label), the result and stderr pipes."""

    pid: int
    page: mmap.mmap
    result: int
    stderr: int

    def running(self) -> bool:
        """Whether the child has entered the sandbox."""
        return self.page[0] == 1

    def label(self) -> str:
        """What the child said runs now."""
        (n,) = struct.unpack("<I", self.page[1:5])
        return self.page[5 : 5 + min(n, _PAGE - 8)].decode("utf-8", "replace") or "loading the inputs"


def spawn(work: Work, limits: Limits, keep: Iterable[int] = ()) -> Spawned:
    """Fork a child that confines itself (`sandbox.confine`), runs `work` and sends its `IsolatedResult` on the
    result pipe."""
    build_reply_models()
    preload(limits)  # libseccomp located once here, not by every child
    page = mmap.mmap(-1, _PAGE)  # MAP_SHARED | MAP_ANONYMOUS: written by the child, read by the parent
    r, w = os.pipe()
    er, ew = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:  # the child: never returns into the caller's code
        faulthandler.disable()  # a crash is reported once, by the parent, as one line
        # what the parent held is never collected here: a finalizer (a file object's, a persistent child's) would
        # close a descriptor number the confinement closed and the child has since reused
        gc.freeze()
        try:
            confine(limits, {w, *keep}, ew, parent)
        except BaseException as exc:
            os.write(2, f"opwire: the isolated child cannot confine itself: {exc!r}\n".encode())
            os._exit(4)
        _child(work, Child(page, limits), w)
    os.close(w)
    os.close(ew)
    return Spawned(pid, page, r, er)


def kill(pid: int) -> None:
    """SIGKILL the child (gone already: nothing to do)."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


Ended = Literal["closed", "timeout", "oversized", "interrupted"]


def _read_all(fd: int, err: int, limits: Limits, page: mmap.mmap, stderr: ChildStderr) -> tuple[bytes, Ended]:
    """Everything the child writes until it closes the pipe ("closed"); ("", "timeout") when the wall time ran out
    first, ("", "oversized") past the memory budget and a MiB. Its stderr is printed (bounded) on the way.

    Loading gets at least a minute (its decode budgets bound it), running `limits.timeout` plus a second's
    grace from the moment the child enters the sandbox, so a slow load does not eat the file's time."""
    grace = None if limits.timeout is None else limits.timeout + 1.0
    deadline = None if grace is None else time.monotonic() + max(grace, _LOADING)
    started = False
    chunks: list[bytes] = []
    size = 0
    watch = [fd, err]
    while True:
        if not started and page[0] == 1:
            started = True
            deadline = None if grace is None else time.monotonic() + grace
        wait = 0.05 if not started else None if deadline is None else max(0.0, deadline - time.monotonic())
        ready, _, _ = select.select(watch, [], [], wait)
        if not ready:
            if deadline is not None and time.monotonic() >= deadline:
                return b"", "timeout"
            continue
        if err in ready and not stderr.feed(os.read(err, 1 << 16)):
            watch.remove(err)
        if fd not in ready:
            continue
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks), "closed"
        size += len(chunk)
        if size > reply_budget(limits):  # the child cannot have built more than its budget
            return b"", "oversized"
        chunks.append(chunk)


def _child(work: Work, child: Child, fd: int) -> None:
    code = 0
    try:
        try:
            payload = encode_result(work(child))
        except BaseException as exc:
            payload = encode_result(child.error(exc))
        view = memoryview(payload)
        while view:
            view = view[os.write(fd, view) :]
    except BaseException:
        code = 3
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def signal_error(sig: int, label: str, limits: Limits) -> OpwireError:
    """The error of a child killed by `sig` while running `label`."""
    if sig == signal.SIGXCPU:
        return BudgetError(
            f"{label} used up the CPU-time budget of the isolated run ({limits.cpu_seconds:g} s); pass a larger "
            "timeout= (CLI: --timeout) if the file is trusted",
            "cpu_time",
        )
    what = _SIGNALS.get(sig, f"signal {sig}")
    return KernelError(
        f"the isolated child died of {what} while running {label}; the op's kernel crashed on this input (the "
        "host process is unharmed). Report the file to the op's authors; --no-isolate would crash the host"
    )


def timeout_error(label: str, limits: Limits) -> OpwireError:
    """The error of a child stopped past its wall time while running `label`."""
    return BudgetError(
        f"{label} ran past the wall-time budget of {limits.timeout:g} s and the isolated child was stopped; pass a "
        "larger timeout= (CLI: --timeout) if the file is trusted",
        "timeout",
    )
