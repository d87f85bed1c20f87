"""Execution budgets: `while_loop` iterations, wall time between nodes, and i64 symbolic arithmetic.

A file decides how much work its program does. Three budgets keep that bounded:

- **loop iterations** (`max_while_iterations=`, default `WHILE_LOOP_ITERATIONS`): a total per run, counted
  across every `while_loop` iteration, `map` row and `scan` step at every nesting level (two nested loops just
  under the bound are refused); an edited condition that never turns false, or a `map` over a file-sized
  leading dimension, is a `BudgetError` once the run's loops iterated that often.
- **execution memory** (`max_memory=` bytes, default `MAX_MEMORY`): `opwire.proxy_executor.checks`.
- **wall time** (`timeout=` seconds, `--timeout`; off by default): checked between nodes (and between
  loop iterations and replayed calls); one kernel already running is not interrupted.
- **symbolic arithmetic** (the fixed table's `_operator.pow`, `lshift`, `mul`, `torch.sym_int`, ...):
  a SymInt is a 64-bit integer in torch, so every integer result must fit in i64, and `pow`/`lshift` are
  bounded *before* computing (`pow(3, 10**9)` would run for minutes, `lshift(1, 2**34)` allocate 2 GiB).
  This bound is torch's own SymInt range and cannot be raised.
"""

from __future__ import annotations

import functools
import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from opwire.errors import BudgetError

__all__ = [
    "I64_MAX",
    "I64_MIN",
    "MAX_MEMORY",
    "WHILE_LOOP_ITERATIONS",
    "check_time",
    "checked_sym_op",
    "current_deadline",
    "loop_budget",
    "time_limit",
    "timed_out",
    "while_loop_with_budget",
]

WHILE_LOOP_ITERATIONS = 100_000
"""Default iteration budget of one `while_loop` call. Each iteration runs two subgraphs through the
executor (tens of microseconds at least), so a runaway loop stops within seconds; the loops torch
programs export (decoding steps, fixed-point iterations, per-row scans) run far fewer. Raise it with
`max_while_iterations=` or `--max-while-iterations`."""

MAX_MEMORY = 2 << 30
"""Default execution-memory budget in bytes: what one node's outputs (checked before allocation-heavy
nodes run) and a program's statically shaped node outputs together (checked at bind) may take. Raise
it with `max_memory=`."""

I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1

_local = threading.local()


def current_deadline() -> float | None:
    """The `time.monotonic()` by which the running thread's work must finish, or None (no wall-time budget)."""
    return getattr(_local, "deadline", None)


@contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Give the work run inside (on this thread) at most `seconds` of wall time; None adds no limit."""
    if seconds is None:
        yield
        return
    before = (current_deadline(), getattr(_local, "seconds", None))
    deadline = time.monotonic() + seconds
    if before[0] is None or deadline < before[0]:
        _local.deadline, _local.seconds = deadline, seconds
    try:
        yield
    finally:
        _local.deadline, _local.seconds = before


def timed_out(where: str) -> BudgetError:
    """The BudgetError of an exceeded wall-time budget, raised at `where`."""
    seconds = getattr(_local, "seconds", None)
    return BudgetError(
        f"{where}: the run exceeded its wall-time budget of {seconds:g} s (checked between nodes); "
        "raise it with timeout=SECONDS (run_program, ProgramRunner, replay) or --timeout SECONDS (opwire run, replay)",
        "timeout",
    )


def check_time(where: str) -> None:
    """Raise the wall-time BudgetError when this thread's deadline has passed."""
    deadline = current_deadline()
    if deadline is not None and time.monotonic() > deadline:
        raise timed_out(where)


@contextmanager
def loop_budget(limit: int) -> Iterator[None]:
    """Count the `while_loop` iterations of the work run inside (this thread) against one total `limit`."""
    before = getattr(_local, "loops", None)
    _local.loops = [0, limit] if before is None else before  # a nested run shares the outer run's total
    try:
        yield
    finally:
        _local.loops = before


def while_loop_with_budget(hop: Callable[..., Any], limit: int, where: str, body_at: int = 1) -> Callable[..., Any]:
    """A looping HOP with its iterations counted against the run's total (`loop_budget`), else `limit`.

    `body_at` is the position of the subgraph run once per iteration: 1 for `while_loop(cond_fn, body_fn, ...)`,
    0 for `map_impl(f, xs, ...)` (one call per row) and `scan(combine_fn, ...)` (one call per step)."""

    def run(*args: Any, **kw: Any) -> Any:
        counter = getattr(_local, "loops", None) or [0, limit]  # outside a run: this call's own budget
        body_fn = args[body_at]

        def body(*inner: Any) -> Any:
            counter[0] += 1  # iterations are body runs: a while_loop's condition runs once more, to turn false
            if counter[0] > counter[1]:
                going = "its condition was still true" if body_at == 1 else "rows remained"
                kind = "while_loop" if body_at == 1 else "map/scan"
                raise BudgetError(
                    f"{where}: {kind} ran {counter[1]} iterations in this run (counted across every loop and "
                    f"nesting) and {going}; the budget is max_while_iterations={counter[1]} (while_loop iterations, "
                    "map rows and scan steps share it); raise it with max_while_iterations= (ProxyExecutor, "
                    "run_program, ProgramRunner) or --max-while-iterations N (opwire run)",
                    "max_while_iterations",
                )
            check_time(f"{where} iteration {counter[0]}")
            return body_fn(*inner)

        return hop(*args[:body_at], body, *args[body_at + 1 :], **kw)

    return run


# --------------------------------------------------------------------------- symbolic arithmetic
def _is_int(v: Any) -> bool:
    return isinstance(v, int)  # bools are ints too, and bounded


def _i64_error(op: str, detail: str) -> BudgetError:
    return BudgetError(
        f"symbolic arithmetic {op} {detail}, outside a SymInt's 64-bit range [-2**63, 2**63 - 1]; "
        "torch's SymInts are 64-bit, so this bound cannot be raised: the file's sizes are wrong",
        "i64",
    )


def _pow_bits(base: int, exp: int) -> float:
    """An upper bound on the bit length of base**exp (exp >= 0)."""
    return exp * math.log2(abs(base)) if abs(base) > 1 else 1.0


def _precheck(name: str, args: tuple[Any, ...]) -> None:
    """Refuse, before computing, the integer operations whose result size is not bounded by their inputs."""
    if len(args) != 2 or not (_is_int(args[0]) and _is_int(args[1])):
        return
    a, b = args
    if name == "pow" and b > 0 and _pow_bits(a, b) > 64:
        raise _i64_error(f"pow({a}, {b})", f"would have about {_pow_bits(a, b):.3g} bits")
    if name == "lshift" and a != 0 and b > 0 and a.bit_length() + b > 64:
        raise _i64_error(f"lshift({a}, {b})", f"would have {a.bit_length() + b} bits")


def _check_result(name: str, args: tuple[Any, ...], result: Any) -> Any:
    if _is_int(result) and not I64_MIN <= result <= I64_MAX:
        shown = ", ".join(f"<{a.bit_length()}-bit int>" if _is_int(a) and abs(a) >> 80 else repr(a) for a in args)
        raise _i64_error(f"{name}({shown})", f"gives a {result.bit_length()}-bit integer")
    return result


def checked_sym_op(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` (a symbolic-size helper of the fixed table) with its integer results kept within i64."""
    name = fn.__name__.rstrip("_")

    @functools.wraps(fn)
    def checked(*args: Any) -> Any:
        _precheck(name, args)
        return _check_result(name, args, fn(*args))

    return checked
