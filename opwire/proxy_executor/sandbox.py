"""The limits an isolated child runs under: address space, CPU time, and a seccomp filter.

`enter(limits)` is called in the child once its inputs are loaded and bound, right before the file's work
runs. It sets `RLIMIT_AS` to what the child already maps plus the execution-memory budget (and 1 GiB of
headroom for reserved arenas and stacks), `RLIMIT_CPU` to
the CPU time used so far plus the CPU budget, and loads a seccomp filter (libseccomp through `pyseccomp`, a
ctypes binding with the API of libseccomp's own Python module) that answers EPERM to: opening a file for
writing (write/read-write access, `O_CREAT`, `O_TRUNC`), `creat`, `openat2`, changing the filesystem
(unlink, rename, mkdir, rmdir, link, symlink, chmod, chown, truncate, mknod), running programs (`execve`,
`execveat`), sockets, new processes (`fork`, `vfork`, `clone` without `CLONE_THREAD`; `clone3` gets ENOSYS
so libc falls back to `clone`), signals to other processes, tracing, io_uring, `bpf` and
`perf_event_open`. Threads, memory mappings (including executable ones: oneDNN's JIT) and reading files
stay allowed, so torch runs as usual.
"""

from __future__ import annotations

import errno
import os
import resource
import tempfile
from dataclasses import dataclass

__all__ = ["DEFAULT_TIMEOUT", "DENIED", "Limits", "default_max_memory", "enter", "parse_size"]

DEFAULT_TIMEOUT = 600.0  # seconds of wall time the CLI gives an isolated run unless --timeout says otherwise

# syscalls answered EPERM unconditionally
DENIED = (
    "creat", "openat2", "execve", "execveat", "socket", "socketpair", "fork", "vfork", "tkill",
    "unlink", "unlinkat", "rename", "renameat", "renameat2", "mkdir", "mkdirat", "rmdir", "link", "linkat",
    "symlink", "symlinkat", "chmod", "fchmod", "fchmodat", "chown", "fchown", "lchown", "fchownat", "truncate",
    "ftruncate", "mknod", "mknodat", "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_open",
    "pidfd_send_signal", "pidfd_getfd", "io_uring_setup", "io_uring_enter", "io_uring_register", "bpf",
    "perf_event_open", "name_to_handle_at", "open_by_handle_at", "unshare", "setns", "userfaultfd", "mount",
    "umount2", "chroot", "pivot_root", "keyctl", "add_key", "request_key", "kexec_load", "reboot",
)  # fmt: skip
_WRITE_FLAGS = (os.O_WRONLY, os.O_RDWR, os.O_CREAT, os.O_TRUNC)
_CLONE_THREAD = 0x00010000


@dataclass(frozen=True)
class Limits:
    """What an isolated child may use: memory it may add (bytes), CPU seconds, wall seconds (None: unbounded)."""

    max_memory: int
    cpu_seconds: float | None = None
    timeout: float | None = None
    threads: int | None = None  # intra-op threads in the child (None: torch's default)
    seccomp: bool = True


ADDRESS_HEADROOM = 1 << 30
"""Address space the child may map beyond the execution-memory budget: allocator arenas, thread stacks and
kernel workspaces that are reserved rather than used (RLIMIT_AS counts reservations)."""


def default_max_memory() -> int:
    """The default execution-memory budget, the same in and out of the sandbox (`budgets.MAX_MEMORY`)."""
    from opwire.proxy_executor.run_budgets import MAX_MEMORY

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


def enter(limits: Limits) -> None:
    """Apply `limits` to this (child) process: rlimits first, then the seccomp filter (irrevocable)."""
    if limits.threads is not None:
        import torch

        torch.set_num_threads(limits.threads)
    _lower(resource.RLIMIT_AS, _mapped_bytes() + limits.max_memory + ADDRESS_HEADROOM, 0)
    if limits.cpu_seconds is not None:
        used = resource.getrusage(resource.RUSAGE_SELF)
        _lower(resource.RLIMIT_CPU, int(used.ru_utime + used.ru_stime + limits.cpu_seconds) + 1, 2)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crash leaves no core file behind
    if limits.seccomp:
        # torch resolves some paths lazily (torch._dynamo's cache directory probes the temp directory by creating a
        # file): resolve it now, while the child may still create files, so a lazy import cannot fail under the filter
        tempfile.gettempdir()
        _load_filter()


def _load_filter() -> None:
    try:
        import pyseccomp as sc
    except (ImportError, OSError) as exc:  # no binding, or no libseccomp.so.2
        from opwire.errors import OpwireError

        raise OpwireError(
            f"the isolated child cannot load its seccomp filter ({exc}); install pyseccomp and libseccomp2, or run "
            "a trusted file with --no-isolate / isolate=False"
        ) from None

    f = sc.SyscallFilter(sc.ALLOW)
    deny = sc.ERRNO(errno.EPERM)
    for name in DENIED:
        try:
            f.add_rule(deny, name)
        except (OSError, ValueError, RuntimeError):  # a syscall this architecture does not have
            continue
    for flag in _WRITE_FLAGS:
        f.add_rule(deny, "open", sc.Arg(1, sc.MASKED_EQ, flag, flag))
        f.add_rule(deny, "openat", sc.Arg(2, sc.MASKED_EQ, flag, flag))
    f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")  # its flags sit in memory a filter cannot read
    f.add_rule(deny, "clone", sc.Arg(0, sc.MASKED_EQ, _CLONE_THREAD, 0))  # a new process, not a thread
    me = os.getpid()
    f.add_rule(deny, "kill", sc.Arg(0, sc.NE, me))
    f.add_rule(deny, "tgkill", sc.Arg(0, sc.NE, me))
    f.load()
