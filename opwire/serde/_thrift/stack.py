"""The explicit stack the checking Thrift decoder reads nested values with, so no depth recursion is used.

Each container reader is a generator: it yields the reader of every container it holds and is sent that
container's value back; `run_frames` keeps the readers on a list instead of the interpreter's stack.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

__all__ = ["Frames", "run_frames"]

Frames = Generator["Frames", Any, Any]
"""A container being read: it yields the reader of each container it holds and is sent that value back."""


def run_frames(top: Frames) -> Any:
    """Drive nested container readers with an explicit stack (no Python recursion, so `max_depth` is the
    only depth limit); an exception in a child is thrown into its parent, as a call would raise it."""
    stack = [top]
    value: Any = None
    error: BaseException | None = None
    while True:
        frame = stack[-1]
        try:
            if error is None:
                child = frame.send(value)
            else:
                child, error = frame.throw(error), None
        except StopIteration as done:
            stack.pop()
            if not stack:
                return done.value
            value = done.value
            continue
        except Exception as exc:  # WireError, Located, ...: the parent's handlers see it next
            stack.pop()
            if not stack:
                raise
            error = exc
            continue
        stack.append(child)
        value = None
