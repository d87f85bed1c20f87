"""The isolated child's confinement: descriptors, terminal, Landlock, rlimits and the seccomp allowlist.

Two steps, both in the child only (the host process's own settings are never touched):
- `confine(limits, keep, err)` right after the fork, while the child has one thread: a new session (no
  controlling terminal), a parent-death signal, not dumpable, no new privileges, stdin from /dev/null,
  stdout and stderr into the pipe the parent reads, every other descriptor closed but `keep` (the result
  channel and what the caller passes on purpose), and Landlock (read-only: the Python and torch installation
  and `limits.reads`; no TCP, no signals out) where the kernel has it.
- `enter(limits)` once the inputs are loaded, right before the file's work: `RLIMIT_AS` (what the child maps
  plus the execution-memory budget and 1 GiB of headroom for reserved arenas and stacks), `RLIMIT_CPU`, no core
  file, then the seccomp allowlist (`syscalls.TABLE`) on every thread (TSYNC), checked per task.

`preload()` runs in the parent before it forks: it imports the seccomp binding once per host process (its import
locates libc and libseccomp with `ctypes.util.find_library`, two `ldconfig -p` runs), so a child inherits the
loaded library instead of starting those processes each time.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass

from opwire.errors import OpwireError
from opwire.proxy_executor import landlock, syscalls
from opwire.proxy_executor.run_budgets import MAX_MEMORY

__all__ = ["DEFAULT_TIMEOUT", "Limits", "confine", "default_max_memory", "enter", "lock_reads", "parse_size", "preload"]

DEFAULT_TIMEOUT = 600.0  # seconds of wall time the CLI gives an isolated run unless --timeout says otherwise

_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE, _PR_SET_NO_NEW_PRIVS = 1, 4, 38


@dataclass(frozen=True)
class Limits:
    """What an isolated child may use: memory it may add (bytes), CPU seconds, wall seconds (None: unbounded)."""

    max_memory: int
    cpu_seconds: float | None = None
    timeout: float | None = None
    threads: int | None = None  # intra-op threads in the child (None: torch's default)
    seccomp: bool = True
    reads: tuple[str, ...] = ()  # files the child may still open read-only after `confine` (Landlock)
    collectives: bool = False  # the rank's connected process group may be used (never a new socket)


ADDRESS_HEADROOM = 1 << 30
"""Address space the child may map beyond the execution-memory budget: allocator arenas, thread stacks and
kernel workspaces that are reserved rather than used (RLIMIT_AS counts reservations)."""


def default_max_memory() -> int:
    """The default execution-memory budget, the same in and out of the sandbox (`budgets.MAX_MEMORY`)."""

    return MAX_MEMORY


def parse_size(text: str) -> int:
    """`4G`, `512M`, `2GiB`, `1000000` -> bytes; ValueError for anything else."""
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}.get(t[-1:], 1)
    number = t[:-1] if scale > 1 else t
    value = int(float(number) * scale)
    if value <= 0:
        raise ValueError(f"expected a positive size, got {text!r}")
    return value


def _mapped_bytes() -> int:
    """The address space this process maps now (VmSize)."""
    with open("/proc/self/status", encoding="ascii", errors="replace") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def _lower(which: int, soft: int, slack: int) -> None:
    """Set a limit to `soft` (hard: `soft + slack`), never above a hard limit the process already has."""
    _, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
        resource.setrlimit(which, (soft, min(soft + slack, hard)))
    else:
        resource.setrlimit(which, (soft, soft + slack))


def confine(limits: Limits, keep: Iterable[int], err: int, parent: int) -> int:
    """In a child freshly forked by `parent`: no terminal, descriptors `keep` only (stdout/stderr to `err`), Landlock.

    Returns the Landlock ABI version enforced (0: the kernel has none)."""
    os.setsid()  # a new session: no controlling terminal, /dev/tty cannot be opened, TIOCSTI has no target
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the death signal was armed
        os._exit(1)
    libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(err, 1)
    os.dup2(err, 2)
    _close_all_but({0, 1, 2, *keep})
    if not limits.seccomp:
        return 0
    return lock_reads(limits.reads, network=limits.collectives)


def preload(limits: Limits) -> None:
    """In the parent, before forking a child confined by `limits`: load the seccomp binding the child will need.
    A missing binding or library is left for the child to report (`enter`), as it would without this."""
    if not limits.seccomp:
        return
    try:
        import pyseccomp  # noqa: F401  (deferred: only a process that forks sandboxed children loads libseccomp)
    except (ImportError, OSError, RuntimeError):  # no binding, no libseccomp.so.2 ("Unable to find libseccomp")
        pass


def lock_reads(reads: Iterable[str], network: bool = False) -> int:
    """Landlock this (one-threaded) process: reads under the installation and `reads` only, nothing written; what
    torch would create or load lazily is resolved first. The ABI version enforced (0: the kernel has none)."""
    # torch imports Dynamo lazily (a custom op's first call), which creates its cache directory: point it at the
    # temp directory, which exists (os.makedirs then creates nothing); gettempdir() probes by creating a file: now
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.gettempdir())
    import pyseccomp  # noqa: F401  (deferred: load libseccomp.so now, before Landlock confines reads)

    return landlock.restrict([*landlock.install_paths(), *reads], network=network)


def _close_all_but(keep: set[int]) -> None:
    low = 0
    for fd in sorted(keep):
        if fd > low:
            os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, 1 << 20)


def enter(limits: Limits) -> None:
    """Apply `limits` to this (child) process: rlimits first, then the seccomp allowlist (irrevocable)."""
    if limits.threads is not None:
        import torch

        torch.set_num_threads(limits.threads)
    _lower(resource.RLIMIT_AS, _mapped_bytes() + limits.max_memory + ADDRESS_HEADROOM, 0)
    if limits.cpu_seconds is not None:
        used = resource.getrusage(resource.RUSAGE_SELF)
        _lower(resource.RLIMIT_CPU, int(used.ru_utime + used.ru_stime + limits.cpu_seconds) + 1, 2)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crash leaves no core file behind
    if limits.seccomp:
        _load_filter(limits.collectives)


def _load_filter(collectives: bool) -> None:
    try:
        syscalls.load(collectives=collectives)
    except (ImportError, OSError) as exc:  # no binding, or no libseccomp.so.2
        raise OpwireError(
            f"the isolated child cannot load its seccomp filter ({exc}); install pyseccomp and libseccomp2, or run "
            "a trusted file with --no-isolate / isolate=False"
        ) from None
