"""Pause the cyclic garbage collector around bulk decodes and encodes (several times faster on large graphs).

A bulk decode creates a large, acyclic tree of models; with the collector on, every few hundred
allocations would scan the young ones again. `paused_gc` turns it off for the block and back on after,
and nothing else: it never calls `gc.freeze` (that would promote every young object of the whole
process, the caller's included) and never collects. Safe from several threads at once: the first
block to enter records whether the collector was on, the last to leave restores that.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["paused_gc"]

_lock = threading.Lock()
_active = 0  # blocks currently inside paused_gc, in all threads
_was_enabled = False  # the collector's state when the first of them entered


@contextmanager
def paused_gc() -> Iterator[None]:
    """Disable the cyclic GC for the block, restoring its previous state after the last concurrent block."""
    global _active, _was_enabled
    with _lock:
        if _active == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _active += 1
    try:
        yield
    finally:
        with _lock:
            _active -= 1
            if _active == 0 and _was_enabled:
                gc.enable()
