"""A one-line progress bar on stderr (calls done, rate, ETA), drawn only on a terminal."""

from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ["Progress"]


class Progress:
    """Redraws at most 10 times a second; `total=None` shows the count and rate without a bar or ETA."""

    def __init__(self, label: str, total: int | None = None, enabled: bool | None = None, out: TextIO | None = None):
        self.out = out if out is not None else sys.stderr
        self.enabled = _is_tty(self.out) if enabled is None else enabled
        self.label, self.total, self.done = label, total, 0
        self._start = self._last = time.monotonic()
        self._drawn = False

    def update(self, n: int = 1) -> None:
        """Count `n` more calls done (redrawn when 0.1 s passed since the last draw)."""
        self.done += n
        if self.enabled:
            now = time.monotonic()
            if now - self._last >= 0.1:
                self._last = now
                self._draw(now)

    def _draw(self, now: float) -> None:
        elapsed = max(now - self._start, 1e-9)
        rate = self.done / elapsed
        if self.total:
            width = 30
            filled = width * min(self.done, self.total) // self.total
            left = (self.total - self.done) / rate if rate else 0.0
            line = (
                f"{self.label} {self.done}/{self.total} [{'#' * filled:<{width}}] {rate:,.0f} calls/s, "
                f"ETA {_clock(left)}"
            )
        else:
            line = f"{self.label} {self.done} calls, {rate:,.0f} calls/s, {_clock(elapsed)}"
        print(f"\r{line}\x1b[K", end="", file=self.out, flush=True)
        self._drawn = True

    def close(self) -> None:
        """Draw the final state and end the line (nothing when disabled or never drawn)."""
        if self.enabled and self._drawn:
            self._draw(time.monotonic())
            print(file=self.out, flush=True)


def _is_tty(out: TextIO) -> bool:
    try:
        return out.isatty()
    except (AttributeError, ValueError):
        return False


def _clock(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"
