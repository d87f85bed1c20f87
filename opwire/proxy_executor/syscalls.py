"""The isolated child's seccomp allowlist: one table, syscall -> why it is allowed (and the argument filter).

Everything not in `TABLE` is refused with EPERM (`clone3` and `openat2` with ENOSYS, so libc falls back to the
calls whose arguments a filter can read). A syscall of another architecture (the 32-bit ABI through `int 0x80`)
can only mean an attack and kills the process. The filter is loaded with TSYNC, so every thread of the child
runs under it, and `load` checks `/proc/self/task/*/status` afterwards. SECURITY.md renders the table
(`opwire.proxy_executor.syscalls.markdown()`); the model is Chromium's `baseline_policy.cc`.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from dataclasses import dataclass

from opwire.errors import OpwireError

__all__ = ["COLLECTIVES", "TABLE", "Rule", "load", "markdown", "seccomp_modes"]

_W, _X = 0x2, 0x4  # PROT_WRITE, PROT_EXEC
_CLONE_VM, _CLONE_SIGHAND, _CLONE_THREAD = 0x100, 0x800, 0x10000
# flags a thread-creating clone may carry besides VM | SIGHAND | THREAD (glibc's pthread_create set)
_CLONE_FREE = 0x200 | 0x400 | 0x40000 | 0x80000 | 0x100000 | 0x200000 | 0x400000 | 0x1000000 | 0xFF
_CLONE_MASK = 0xFFFF_FFFF_FFFF_FFFF & ~_CLONE_FREE
_OPEN_MASK = 0x3 | 0x40 | 0x200 | 0x400000  # O_ACCMODE, O_CREAT, O_TRUNC, __O_TMPFILE
_F_SETFL, _O_ASYNC = 4, 0x2000

# An argument condition: (argument index, "eq" | "masked", a, b): eq -> arg == a; masked -> arg & a == b.
Cond = tuple[int, str, int, int]


@dataclass(frozen=True)
class Rule:
    """One allowed syscall: its name, why the child needs it, and the argument conditions (any of `when` holds)."""

    name: str
    reason: str
    when: tuple[tuple[Cond, ...], ...] = ((),)
    shown: str = ""  # the argument filter as the docs state it


def _prot(arg: int) -> tuple[tuple[Cond, ...], ...]:
    """Never writable and executable at once (W^X): prot & (W|X) is 0, W or X."""
    return tuple(((arg, "masked", _W | _X, v),) for v in (0, _W, _X))


def _eq(arg: int, *values: int) -> tuple[tuple[Cond, ...], ...]:
    return tuple(((arg, "eq", v, 0),) for v in values)


_ME = -1  # replaced by the child's pid when the filter is built

_MEMORY = "memory for tensors, the allocator and thread stacks"
_W_X = "prot never both PROT_WRITE and PROT_EXEC (a new mapping is not writable and executable)"
TABLE: tuple[Rule, ...] = (
    Rule("read", "read from a descriptor the child holds (the inputs, a trace)"),
    Rule("pread64", "read a trace's payload at an offset"),
    Rule("readv", "vectored read on a held descriptor"),
    Rule("preadv", "vectored read at an offset"),
    Rule("preadv2", "vectored read at an offset"),
    Rule("write", "write the result and stderr pipes (the child opens nothing writable)"),
    Rule("writev", "vectored write on a held descriptor"),
    Rule("pwrite64", "positioned write on a held descriptor"),
    Rule("lseek", "seek a held descriptor"),
    Rule("close", "close a descriptor"),
    Rule("close_range", "close descriptors"),
    Rule("dup", "duplicate a held descriptor"),
    Rule("dup2", "duplicate a held descriptor"),
    Rule("dup3", "duplicate a held descriptor"),
    Rule("fstat", "size of a held descriptor"),
    Rule(
        "ftruncate",
        "the run guard resets its stderr memfd (the persistent runner's memfds are sealed against "
        "shrinking; a pipe or a read-only file cannot be truncated)",
    ),
    Rule("memfd_create", "the run guard's stderr capture (anonymous memory, no path)"),
    Rule("newfstatat", 'stat (metadata only; glibc\'s fstat is newfstatat(fd, "", AT_EMPTY_PATH))'),
    Rule("statx", "stat (metadata only)"),
    Rule("stat", "stat (metadata only)"),
    Rule("lstat", "stat (metadata only)"),
    Rule("access", "the import system probes paths (metadata only)"),
    Rule("faccessat", "the import system probes paths (metadata only)"),
    Rule("faccessat2", "the import system probes paths (metadata only)"),
    Rule("readlink", "path resolution in imports (metadata only)"),
    Rule("readlinkat", "path resolution in imports (metadata only)"),
    Rule("getcwd", "path resolution in imports"),
    Rule("getdents64", "list a directory it opened (Landlock bounds which)"),
    Rule("fstatfs", "glibc sizes a held descriptor's filesystem"),
    Rule(
        "openat",
        "read-only opens: torch and Python load code lazily; Landlock confines them to the installation",
        (((2, "masked", _OPEN_MASK, 0),),),
        "flags without O_WRONLY, O_RDWR, O_CREAT, O_TRUNC, O_TMPFILE",
    ),
    Rule("open", "as openat (the legacy call)", (((1, "masked", _OPEN_MASK, 0),),), "read-only, as openat"),
    Rule(
        "fcntl",
        "descriptor flags (close-on-exec, non-blocking, duplicate); no F_SETOWN: SIGIO may not reach another pid",
        (*_eq(1, 0, 1, 2, 3, 1030, 1034), ((1, "eq", _F_SETFL, 0), (2, "masked", _O_ASYNC, 0))),
        "cmd F_DUPFD, F_GETFD, F_SETFD, F_GETFL, F_DUPFD_CLOEXEC, F_GET_SEALS; F_SETFL without O_ASYNC",
    ),
    Rule(
        "ioctl",
        "isatty (TCGETS) and close-on-exec (FIOCLEX, FIONCLEX); no TIOCSTI or any device control",
        _eq(1, 0x5401, 0x5451, 0x5450),
        "cmd TCGETS, FIOCLEX, FIONCLEX",
    ),
    Rule("mmap", _MEMORY, _prot(2), _W_X),
    Rule("mprotect", "guard pages; oneDNN's JIT (Xbyak) makes its code buffer read-write-execute"),
    Rule("pkey_mprotect", "as mprotect"),
    Rule("munmap", _MEMORY),
    Rule("mremap", "growing a buffer"),
    Rule("madvise", "the allocator returns memory"),
    Rule("brk", "the heap"),
    Rule("membarrier", "memory ordering across the child's own threads"),
    Rule("get_mempolicy", "OpenMP reads the NUMA policy (read-only)"),
    Rule("futex", "locks and condition variables between threads"),
    Rule("futex_waitv", "locks between threads"),
    Rule("set_robust_list", "a new thread registers its lock list"),
    Rule("rseq", "a new thread registers restartable sequences"),
    Rule("set_tid_address", "thread start-up"),
    Rule(
        "clone",
        "threads only (OpenMP, torch's pools): the flags must include CLONE_VM|CLONE_SIGHAND|CLONE_THREAD and no "
        "namespace, vfork, parent or ptrace flag",
        (((0, "masked", _CLONE_MASK, _CLONE_VM | _CLONE_SIGHAND | _CLONE_THREAD),),),
        "flags & ~(pthread_create's flags) == CLONE_VM|CLONE_SIGHAND|CLONE_THREAD",
    ),
    Rule("sched_yield", "spinning OpenMP workers"),
    Rule("sched_getaffinity", "OpenMP sizes its pool (read-only)"),
    Rule("sched_setaffinity", "pin the calling thread", _eq(0, 0), "pid 0 (this thread)"),
    Rule("sched_getparam", "scheduling parameters (read-only)"),
    Rule("sched_getscheduler", "scheduling policy (read-only)"),
    Rule("getcpu", "which CPU runs this thread"),
    Rule("nanosleep", "sleeping"),
    Rule("clock_nanosleep", "sleeping"),
    Rule("clock_gettime", "time"),
    Rule("clock_getres", "time"),
    Rule("gettimeofday", "time"),
    Rule("time", "time"),
    Rule("times", "CPU time used"),
    Rule("getrusage", "CPU time and memory used"),
    Rule("prlimit64", "read its own limits", (((0, "eq", 0, 0), (2, "eq", 0, 0)),), "pid 0, no new limit"),
    Rule("getpid", "its own pid"),
    Rule("gettid", "its own thread id"),
    Rule("getppid", "its parent's pid"),
    Rule("getuid", "identity (read-only)"),
    Rule("geteuid", "identity (read-only)"),
    Rule("getgid", "identity (read-only)"),
    Rule("getegid", "identity (read-only)"),
    Rule("getresuid", "identity (read-only)"),
    Rule("getresgid", "identity (read-only)"),
    Rule("uname", "the platform (read-only)"),
    Rule("sysinfo", "memory size (read-only)"),
    Rule("getrandom", "random numbers"),
    Rule("poll", "wait on held descriptors"),
    Rule("ppoll", "wait on held descriptors"),
    Rule("select", "wait on held descriptors"),
    Rule("pselect6", "wait on held descriptors"),
    Rule("rt_sigaction", "signal handlers (Python's, faulthandler's)"),
    Rule("rt_sigprocmask", "signal masks"),
    Rule("rt_sigreturn", "return from a signal handler"),
    Rule("rt_sigpending", "pending signals"),
    Rule("rt_sigsuspend", "wait for a signal"),
    Rule("sigaltstack", "signal stacks of new threads"),
    Rule("restart_syscall", "an interrupted sleep resumes"),
    Rule("kill", "signals to itself only (abort, Python's signal tests)", _eq(0, _ME), "pid == the child"),
    Rule("tgkill", "signals to its own threads only (raise, abort)", _eq(0, _ME), "tgid == the child"),
    Rule(
        "prctl",
        "thread names and mapping names; no other process attribute",
        _eq(0, 15, 16, 3, 21, 0x53564D41),
        "PR_SET_NAME, PR_GET_NAME, PR_GET_DUMPABLE, PR_GET_SECCOMP, PR_SET_VMA",
    ),
    Rule(
        "arch_prctl",
        "oneDNN asks for the AMX tile state on CPUs that have it",
        _eq(0, 0x1021, 0x1022, 0x1023),
        "ARCH_GET_XCOMP_SUPP, ARCH_GET_XCOMP_PERM, ARCH_REQ_XCOMP_PERM",
    ),
    Rule("exit", "a thread ends"),
    Rule("exit_group", "the child ends"),
)

# `opwire replay RUN --collectives`: the rank's process group is connected before the filter; it may use those
# sockets, never open, bind, connect or accept another
COLLECTIVES: tuple[Rule, ...] = (
    Rule("sendto", "collectives on the group's connected sockets"),
    Rule("recvfrom", "collectives on the group's connected sockets"),
    Rule("sendmsg", "collectives on the group's connected sockets"),
    Rule("recvmsg", "collectives on the group's connected sockets"),
    Rule("sendmmsg", "collectives on the group's connected sockets"),
    Rule("recvmmsg", "collectives on the group's connected sockets"),
    Rule("shutdown", "closing the group's connections"),
    Rule("getsockopt", "socket state of the group's connections"),
    Rule("setsockopt", "socket options of the group's connections"),
    Rule("getsockname", "the group's connection addresses"),
    Rule("getpeername", "the group's connection addresses"),
    Rule("epoll_create1", "gloo's event loop"),
    Rule("epoll_ctl", "gloo's event loop"),
    Rule("epoll_wait", "gloo's event loop"),
    Rule("epoll_pwait", "gloo's event loop"),
    Rule("eventfd2", "gloo's event loop wake-ups"),
    Rule("pipe2", "gloo's event loop wake-ups"),
)


def _conditions(rule: Rule, me: int) -> Iterator[tuple[Cond, ...]]:
    for conds in rule.when:
        yield tuple((i, kind, me if a == _ME else a, b) for i, kind, a, b in conds)


def load(*, collectives: bool = False) -> None:
    """Load the allowlist on every thread of this process (TSYNC) and check that each task reports it."""
    import pyseccomp as sc  # deferred: only a sandboxed child needs libseccomp (imported before Landlock applies)

    f = sc.SyscallFilter(sc.ERRNO(errno.EPERM))
    f.set_attr(sc.Attr.ACT_BADARCH, sc.KILL_PROCESS)
    f.set_attr(sc.Attr.CTL_TSYNC, 1)
    me = os.getpid()
    for rule in TABLE + (COLLECTIVES if collectives else ()):
        for conds in _conditions(rule, me):
            args = [sc.Arg(i, sc.EQ if kind == "eq" else sc.MASKED_EQ, a, b) for i, kind, a, b in conds]
            try:
                f.add_rule(sc.ALLOW, rule.name, *args)
            except (OSError, ValueError, RuntimeError):  # a syscall this architecture does not have
                break
    for name in ("clone3", "openat2"):  # their arguments sit in memory a filter cannot read: libc falls back
        f.add_rule(sc.ERRNO(errno.ENOSYS), name)
    f.load()
    modes = seccomp_modes()
    if not modes or any(mode != "2" for mode in modes.values()):
        raise OpwireError(f"the isolated child's seccomp filter is not on every thread (Seccomp: per task {modes})")


def seccomp_modes() -> dict[str, str]:
    """Task id -> the `Seccomp:` field of its /proc status (2: a filter), for every thread of this process."""
    modes: dict[str, str] = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/status", encoding="ascii", errors="replace") as f:
                modes[tid] = next((ln.split()[1] for ln in f if ln.startswith("Seccomp:")), "?")
        except FileNotFoundError:  # the thread ended while we looked
            continue
    return modes


def markdown() -> str:
    """The allowlist as a Markdown table (SECURITY.md)."""
    lines = ["| syscall | why the child needs it | arguments allowed |", "|---|---|---|"]
    for rule in TABLE:
        lines.append(f"| `{rule.name}` | {rule.reason} | {rule.shown or 'any'} |")
    lines.append("")
    lines.append("With `--collectives`, after the rank's group is connected, also:")
    lines.append("")
    lines.append("| syscall | why | arguments allowed |")
    lines.append("|---|---|---|")
    for rule in COLLECTIVES:
        lines.append(f"| `{rule.name}` | {rule.reason} | {rule.shown or 'any'} |")
    return "\n".join(lines)
