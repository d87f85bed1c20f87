"""Output files: every command that writes opens its output path through `open_output`.

The path's last component must not be a symlink (`O_NOFOLLOW`) and must be a regular file or not exist (a
FIFO, a device or a directory is refused before it is opened for writing); the file must not be one of the
command's inputs (same device and inode: `--out` naming the input, or a hard link to it). The file is
truncated only after these checks, so a refused write changes nothing.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import IO

from opwire.errors import OpwireError, printable

__all__ = ["check_output", "open_output", "write_output"]


def _refuse(path: str, why: str) -> OpwireError:
    return OpwireError(f"refusing to write {printable(path)}: {why}; name a new file or a regular file you own")


def check_output(path: str | os.PathLike[str], inputs: Iterable[str | os.PathLike[str]] = ()) -> None:
    """An OpwireError unless `path` is a regular file or absent, not a symlink, and none of `inputs`."""
    p = os.fspath(path)
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise _refuse(p, "it is a symbolic link (opwire does not write through links)")
    if not stat.S_ISREG(st.st_mode):
        raise _refuse(p, "it is not a regular file (a directory, FIFO, socket or device)")
    _not_an_input(p, st, inputs)


def _not_an_input(p: str, st: os.stat_result, inputs: Iterable[str | os.PathLike[str]]) -> None:
    for src in inputs:
        try:
            other = os.stat(src)
        except OSError:
            continue
        if (other.st_dev, other.st_ino) == (st.st_dev, st.st_ino):
            raise _refuse(p, f"it is the input {printable(os.fspath(src))}")


def open_output(
    path: str | os.PathLike[str], inputs: Iterable[str | os.PathLike[str]] = (), buffering: int = -1
) -> IO[bytes]:
    """`path` opened for writing (truncated) after the checks above; never through a symlink."""
    p = os.fspath(path)
    inputs = list(inputs)
    check_output(p, inputs)
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(p, flags, 0o666)
    except OSError as exc:
        if exc.errno in (40, 6):  # ELOOP: a link planted since the check; ENXIO: a FIFO without reader
            raise _refuse(p, "it is a symbolic link or a FIFO") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _refuse(p, "it is not a regular file")
        _not_an_input(p, st, inputs)
        os.set_blocking(fd, True)
        os.ftruncate(fd, 0)
        return os.fdopen(fd, "wb", buffering=buffering)
    except BaseException:
        os.close(fd)
        raise


def write_output(path: str | os.PathLike[str], data: bytes, inputs: Iterable[str | os.PathLike[str]] = ()) -> Path:
    """Write `data` to `path` through `open_output`."""
    with open_output(path, inputs) as f:
        f.write(data)
    return Path(path)
