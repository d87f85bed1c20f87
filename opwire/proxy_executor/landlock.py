"""Landlock for the isolated child: read-only access to the Python and torch installation and the files the parent
names, no other file, no TCP bind or connect, no signal or abstract socket outside the child.

A small ctypes layer over the three syscalls (444-446 on every Linux architecture): the Python bindings on PyPI
are unmaintained or pull in a build step, and the ABI is three calls and two structs. `restrict` returns the
Landlock ABI version it enforced (0 where the kernel has no Landlock: the seccomp allowlist then still refuses
every write, but read-only opens are not confined to the installation; SECURITY.md's known limits say so).
Landlock applies to the calling thread and the threads it starts later, so the child calls it right after the
fork, while it has one thread.
"""

from __future__ import annotations

import ctypes
import os
import stat
import sys
from collections.abc import Iterable

__all__ = ["abi_version", "install_paths", "restrict"]

_CREATE, _ADD_RULE, _RESTRICT = 444, 445, 446
_VERSION_FLAG = 1  # LANDLOCK_CREATE_RULESET_VERSION
_PATH_BENEATH = 1
_EXECUTE, _WRITE_FILE, _READ_FILE, _READ_DIR = 1, 2, 4, 8
_FILE_RIGHTS = _EXECUTE | _WRITE_FILE | _READ_FILE | (1 << 14) | (1 << 15)  # + TRUNCATE, IOCTL_DEV
_ABI_FS = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 5: (1 << 16) - 1}
_PR_SET_NO_NEW_PRIVS = 38

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


class _Ruleset(ctypes.Structure):
    _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def abi_version() -> int:
    """The kernel's Landlock ABI version (0: no Landlock)."""
    v = _libc.syscall(_CREATE, None, ctypes.c_size_t(0), ctypes.c_uint32(_VERSION_FLAG))
    return max(0, int(v))


def install_paths() -> list[str]:
    """Directories a child may read: the interpreter's prefixes, sys.path's directories, torch's and opwire's
    packages, the system's shared libraries and CPU topology (what lazy imports and dlopen read)."""
    import torch  # deferred: torch is already loaded in any child; the path is where its lazy libraries live

    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(torch.__file__)}
    paths |= {os.path.dirname(os.path.dirname(os.path.abspath(__file__)))}  # opwire's package: lazy imports
    paths |= {p for p in sys.path if os.path.isabs(p) and ("site-packages" in p or p.startswith(sys.base_prefix))}
    paths |= {"/usr/lib", "/usr/lib64", "/lib", "/lib64", "/etc/ld.so.cache", "/sys/devices/system/cpu", "/proc/self"}
    paths |= {"/proc/cpuinfo"}  # torch's cpuinfo reads it lazily, on the first oneDNN kernel
    return sorted(p for p in paths if p and os.path.exists(p))


def restrict(reads: Iterable[str], network: bool = False) -> int:
    """Confine this thread (and the threads it starts) to reading `reads`; the ABI version enforced (0: none).
    `network`: leave TCP bind and connect alone (a rank connecting its process group)."""
    abi = abi_version()
    if abi < 1:
        return 0
    fs = _ABI_FS[max(k for k in _ABI_FS if k <= abi)]
    net = 0b11 if abi >= 4 and not network else 0  # TCP bind + connect
    attr = _Ruleset(fs, net, 0b11 if abi >= 6 else 0)  # scoped: abstract unix sockets, signals
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    fd = _libc.syscall(_CREATE, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if fd < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset failed")
    try:
        for path in reads:
            _allow(int(fd), path)
        if _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS failed")
        if _libc.syscall(_RESTRICT, ctypes.c_int(fd), ctypes.c_uint32(0)) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")
    finally:
        os.close(fd)
    return abi


def _allow(ruleset: int, path: str) -> None:
    try:
        target = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:  # gone, or not ours to read: nothing to allow
        return
    try:
        is_dir = stat.S_ISDIR(os.fstat(target).st_mode)
        rule = _PathBeneath(_READ_FILE | _READ_DIR if is_dir else _READ_FILE & _FILE_RIGHTS, target)
        if _libc.syscall(_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_PATH_BENEATH), ctypes.byref(rule), 0) != 0:
            raise OSError(ctypes.get_errno(), f"landlock_add_rule failed for {path}")
    finally:
        os.close(target)
