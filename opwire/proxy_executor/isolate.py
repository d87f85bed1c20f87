"""Run a file's work in a sandboxed child process and bring its results back as bytes.

`run_in_child(work, limits)` forks (`spawn`). The child (torch already imported, the parent's loaded libraries
and registered ops inherited) first confines itself (`sandbox.confine`: no terminal, only the descriptors it
is given, stdout/stderr into a pipe, Landlock), then calls `work(child)`: the work loads what it needs, calls
`child.ready()` (which applies `sandbox.enter(limits)`: address space, CPU time, the seccomp allowlist on every
thread) once its inputs are loaded, says which node runs with `child.at(label)` before each, and returns named
byte strings. The parent reads them through a pipe, never unpickling: callers encode with opwire's own codecs
and decode with its checking decoders; it prints the child's stderr, escaped and bounded (`child_stderr`). What
the child says it is running sits in a shared page, so a crash (SIGSEGV, SIGABRT, SIGBUS), a limit (CPU time,
wall time) or a failure the child reports comes back as one opwire error naming it.

Forking is cheap (no second interpreter, no second torch import). OpenMP's thread pool does not survive a
fork once it has run parallel work, so a child whose parent may have (the Python API's) runs its kernels
on `Limits.threads` threads (1); the CLI forks before any parallel work and keeps torch's default.
"""

from __future__ import annotations

import faulthandler
import gc
import json
import mmap
import os
import select
import signal
import struct
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from opwire.errors import (
    BindError,
    BudgetError,
    DecodeError,
    EncodeError,
    KernelError,
    OpwireError,
    UnknownTargetError,
    describe_exception,
    printable,
)
from opwire.proxy_executor.child_stderr import ChildStderr
from opwire.proxy_executor.sandbox import Limits, confine, enter

__all__ = [
    "Child", "Outcome", "Spawned", "error_record", "kill", "rebuild", "run_in_child", "signal_error", "spawn",
    "timeout_error",
]  # fmt: skip

_ERRORS: dict[str, type[OpwireError]] = {
    c.__name__: c
    for c in (OpwireError, DecodeError, EncodeError, BindError, UnknownTargetError, KernelError, BudgetError)
}
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
_OUT_OF_MEMORY = ("can't allocate memory", "not enough memory", "cannot allocate memory", "std::bad_alloc")


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
        return rebuild(error_record(exc, self))

    def ready(self) -> None:
        """Inputs are loaded and bound: apply the limits and the filter; from here on it is the file's work."""
        if self._page is not None and self._limits is not None:
            enter(self._limits)
            self._page[0] = 1


@dataclass
class Outcome:
    """What came back: the named blobs, or the error; `running` is True when the child had entered the sandbox."""

    blobs: dict[str, bytes]
    error: OpwireError | None
    running: bool

    def result(self) -> dict[str, bytes]:
        """The blobs, or raise the error."""
        if self.error is not None:
            raise self.error
        return self.blobs


def in_process(work: Callable[[Child], dict[str, bytes]]) -> dict[str, bytes]:
    """Run `work` here, unsandboxed (`--no-isolate`, trusted files)."""
    return work(Child(None, None))


def run_in_child(work: Callable[[Child], dict[str, bytes]], limits: Limits, keep: Iterable[int] = ()) -> Outcome:
    """Fork, run `work(child)` in the child under `limits`, and return what it sent (or the one error).

    `keep`: descriptors the child keeps (files the parent opened for it); every other one is closed there."""
    spawned = spawn(work, limits, keep)
    pid, page, r, er = spawned.pid, spawned.page, spawned.result, spawned.stderr
    data, timed_out, finished = b"", False, False
    stderr = ChildStderr()
    try:
        data, timed_out = _read_all(r, er, limits, page, stderr)
        finished = not timed_out and bool(data)
    finally:
        os.close(r)
        if not finished:  # out of time, too much output, or interrupted: the child goes now
            kill(pid)
    _, status = os.waitpid(pid, 0)
    stderr.drain(er)
    os.close(er)
    running, label = spawned.running(), spawned.label()
    page.close()
    if timed_out:
        return Outcome({}, timeout_error(label, limits), running)
    if os.WIFSIGNALED(status):
        return Outcome({}, signal_error(os.WTERMSIG(status), label, limits), running)
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 4 and not data:
        return Outcome({}, KernelError("the isolated child could not enter its sandbox (see its stderr above)"), False)
    try:
        return _decode(data, running)
    except (ValueError, KeyError, TypeError, struct.error, UnicodeDecodeError):
        return Outcome({}, KernelError(f"the isolated child sent a malformed result while running {label}"), running)


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


def spawn(work: Callable[[Child], dict[str, bytes]], limits: Limits, keep: Iterable[int] = ()) -> Spawned:
    """Fork a child that confines itself (`sandbox.confine`), runs `work` and sends its blobs on the result pipe."""
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


def _read_all(fd: int, err: int, limits: Limits, page: mmap.mmap, stderr: ChildStderr) -> tuple[bytes, bool]:
    """Everything the child writes until it closes the pipe; (data, True) when the wall time ran out first.
    Its stderr is printed (bounded) on the way.

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
                return b"", True
            continue
        if err in ready and not stderr.feed(os.read(err, 1 << 16)):
            watch.remove(err)
        if fd not in ready:
            continue
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks), False
        size += len(chunk)
        if size > limits.max_memory + (1 << 20):  # the child cannot have built more than its budget
            return b"", False
        chunks.append(chunk)


def _child(work: Callable[[Child], dict[str, bytes]], child: Child, fd: int) -> None:
    code = 0
    try:
        try:
            payload = b"OK" + _encode(work(child))
        except BaseException as exc:
            payload = b"ER" + json.dumps(error_record(exc, child)).encode()
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


def error_record(exc: BaseException, child: Child) -> dict[str, str]:
    """The class, message and budget of what the child raised (memory exhaustion as the memory budget)."""
    text = f"{exc} {exc.__cause__ or ''}".lower()
    refused = isinstance(exc, OSError) and exc.errno in (1, 13)  # EPERM: seccomp; EACCES: Landlock
    said = ("[errno 1] operation not permitted", "[errno 13] permission denied")
    refused = refused or (isinstance(exc, KernelError) and any(s in text for s in said))
    if isinstance(exc, MemoryError) or (not isinstance(exc, BudgetError) and any(s in text for s in _OUT_OF_MEMORY)):
        limits = child._limits
        budget = f"{limits.max_memory / (1 << 30):.3g} GiB" if limits is not None else "the memory"
        return {
            "class": "BudgetError",
            "budget": "max_memory",
            "message": f"{child.label} ran out of the execution-memory budget ({budget}; {describe_exception(exc)}); "
            "pass a larger max_memory= (CLI: --max-memory) if the file is trusted",
        }
    if refused:
        return {
            "class": "KernelError",
            "message": f"{child.label}: the sandbox refused a system call ({describe_exception(exc)}): an isolated "
            "run may not write files, read files outside the Python and torch installation, start programs or "
            "open sockets (run a trusted file with --no-isolate / isolate=False)",
        }
    if isinstance(exc, OpwireError):
        return {"class": type(exc).__name__, "message": str(exc), "budget": getattr(exc, "budget", "")}
    return {"class": "KernelError", "message": f"{child.label} failed in the isolated child: {describe_exception(exc)}"}


def rebuild(rec: dict[str, str]) -> OpwireError:
    """The opwire error an error record describes (only opwire's own classes; anything else a KernelError)."""
    cls = _ERRORS.get(str(rec.get("class")), KernelError)
    message = printable(str(rec.get("message", "")))
    return BudgetError(message, str(rec.get("budget", ""))) if cls is BudgetError else cls(message)


def _encode(blobs: dict[str, bytes]) -> bytes:
    parts = [struct.pack("<I", len(blobs))]
    for name, data in blobs.items():
        key = name.encode()
        parts += [struct.pack("<IQ", len(key), len(data)), key, data]
    return b"".join(parts)


def _decode(data: bytes, running: bool) -> Outcome:
    if data[:2] == b"ER":
        return Outcome({}, rebuild(json.loads(data[2:])), running)
    if data[:2] != b"OK":
        raise ValueError("no result")
    (count,) = struct.unpack_from("<I", data, 2)
    pos, blobs = 6, {}
    for _ in range(count):
        n, size = struct.unpack_from("<IQ", data, pos)
        pos += 12
        name = data[pos : pos + n].decode()
        pos += n
        if pos + size > len(data):
            raise ValueError("truncated")
        blobs[name] = data[pos : pos + size]
        pos += size
    return Outcome(blobs, None, running)


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
