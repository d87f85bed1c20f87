"""Reading a whole input file within a byte budget: devices, pipes and huge files never exhaust memory.

`read_input` refuses a regular file larger than the budget before reading a byte, and reads anything
else (`/dev/zero`, a FIFO) in chunks that stop at the budget. `read_head` gives the first bytes, which
is all format detection needs.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from opwire.errors import DecodeError
from opwire.serde import budgets

__all__ = ["read_head", "read_input"]

_CHUNK = 1 << 20


def _empty(path: str | Path, what: str) -> DecodeError:
    return DecodeError(
        f"{path}: the {what} is empty (0 bytes); it was not written completely, or is not the file meant"
    )


def read_head(path: str | Path, n: int = 64, *, what: str = "file") -> bytes:
    """The first `n` bytes of a file (fewer if it is shorter); a DecodeError saying so for an empty file."""
    with Path(path).open("rb") as f:
        head = f.read(n)
    if not head and n:
        raise _empty(path, what)
    return head


def read_input(path: str | Path, *, max_bytes: int = budgets.MAX_INPUT_BYTES, what: str = "input") -> bytes:
    """All bytes of `path`, or a DecodeError naming the budget when there are more than `max_bytes`."""
    p = Path(path)
    with p.open("rb") as f:
        st = os.fstat(f.fileno())
        if stat.S_ISREG(st.st_mode):
            if st.st_size > max_bytes:
                raise budgets.exceeded(f"{p}: the {what} has bytes", st.st_size, "max_bytes", max_bytes)
            data = f.read()
            if not data:
                raise _empty(p, what)
            return data
        out = bytearray()
        while True:
            chunk = f.read(min(_CHUNK, max_bytes + 1 - len(out)))
            if not chunk:
                if not out:
                    raise _empty(p, what)
                return bytes(out)
            out += chunk
            if len(out) > max_bytes:
                raise budgets.exceeded(
                    f"{p}: the {what} (not a regular file) has bytes", len(out), "max_bytes", max_bytes
                )
