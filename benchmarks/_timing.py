"""Timing shared by the benchmarks: the best of several runs of a call, measured in this process."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import Any

__all__ = ["best_of"]


def best_of(fn: Callable[[], Any], repeat: int, *, gc_on: bool = True, collect_first: bool = False) -> float:
    """Fastest of `repeat` calls of `fn`, in seconds.

    `gc_on=False` runs each call with the garbage collector disabled (restored after); `collect_first`
    collects before each call so garbage from the previous one is not billed to the next.
    """
    best = float("inf")
    for _ in range(repeat):
        if collect_first:
            gc.collect()
        if not gc_on:
            gc.disable()
        try:
            start = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - start)
        finally:
            gc.enable()
    return best
