"""The isolated child's stderr (Python warnings, torch's kernel warnings, a crash's last words), printed by the
parent on its own stderr one escaped line at a time, bounded: the host's stderr is never handed to the child."""

from __future__ import annotations

import os
import sys

from opwire.errors import printable

__all__ = ["MAX_STDERR", "ChildStderr"]

MAX_STDERR = 64 << 10  # bytes of the child's stderr printed; the rest is counted, not shown


class ChildStderr:
    """Collects the child's stderr and prints each complete line through `printable`, up to `MAX_STDERR` bytes."""

    def __init__(self, limit: int = MAX_STDERR) -> None:
        self.limit = limit
        self.shown = 0
        self.dropped = 0
        self._partial = b""

    def feed(self, chunk: bytes) -> bool:
        """Take what the pipe gave; False at its end (the rest of a line is printed then)."""
        if not chunk:
            self._flush_partial()
            return False
        room = self.limit - self.shown
        if room <= 0:
            self.dropped += len(chunk)
            return True
        kept, self.dropped = chunk[:room], self.dropped + max(0, len(chunk) - room)
        self.shown += len(kept)
        *lines, self._partial = (self._partial + kept).split(b"\n")
        for line in lines:
            _say(line)
        return True

    def drain(self, fd: int) -> None:
        """Read what is left on `fd` (the child has exited) and print the summary of what was dropped."""
        os.set_blocking(fd, False)
        try:
            while self.feed(os.read(fd, 1 << 16)):
                pass
        except BlockingIOError:  # a descendant still holds the pipe open (cannot happen under the filter)
            self._flush_partial()
        if self.dropped:
            print(f"(the isolated child wrote {self.dropped} more bytes on stderr, not shown)", file=sys.stderr)
            self.dropped = 0

    def _flush_partial(self) -> None:
        if self._partial:
            _say(self._partial)
            self._partial = b""


def _say(line: bytes) -> None:
    print(printable(line.decode("utf-8", "replace").rstrip("\r")), file=sys.stderr)
