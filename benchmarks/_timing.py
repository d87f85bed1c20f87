"""Timing shared by the benchmarks: the best of several runs of a call, measured in this process."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import Any

__all__ = ["best_of"]


def best_of(
    fn: Callable[[], Any],
    repeat: int,
    *,
    gc_on: bool = True,
    collect_first: bool = False,
    clock: Callable[[], float] = time.perf_counter,
) -> float:
    """Fastest of `repeat` calls of `fn`, in seconds of `clock`.

    `gc_on=False` runs each call with the garbage collector disabled (restored after); `collect_first`
    collects before each call so garbage from the previous one is not billed to the next. `clock`:
    wall time by default; `time.thread_time` (this thread's CPU time) compares single-threaded work
    without billing it the time a loaded machine gives to other processes.
    """
    best = float("inf")
    for _ in range(repeat):
        if collect_first:
            gc.collect()
        if not gc_on:
            gc.disable()
        try:
            start = clock()
            fn()
            best = min(best, clock() - start)
        finally:
            gc.enable()
    return best
