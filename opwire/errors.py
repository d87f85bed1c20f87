"""opwire's exception hierarchy: one root, importable by every layer."""

from __future__ import annotations

__all__ = [
    "BindError",
    "BudgetError",
    "DecodeError",
    "EncodeError",
    "KernelError",
    "OpValidationError",
    "OpwireError",
    "OpwireWarning",
    "UnknownTargetError",
    "describe_exception",
    "first_line",
    "printable",
]


class OpwireWarning(UserWarning):
    """Base of every warning opwire emits (pytest turns these into errors in the test suite)."""


class OpwireError(Exception):
    """Root of every error opwire raises."""


class DecodeError(OpwireError, ValueError):
    """Bytes or JSON that are not a valid instance of the requested type."""

    def __init__(self, message: str, path: str = "") -> None:
        self.path = path
        super().__init__(message)


class EncodeError(OpwireError, ValueError):
    """A model that cannot be written in the requested format."""

    def __init__(self, message: str, path: str = "") -> None:
        self.path = path
        super().__init__(message)


class BindError(OpwireError):
    """A serialized call does not fit its op schema (names, types, missing arguments, policy)."""


class UnknownTargetError(BindError):
    """A target that is neither a loaded op nor in the executor's fixed table."""


class KernelError(OpwireError):
    """The kernel itself raised; wraps the original exception with the op and node."""


class BudgetError(OpwireError):
    """Running a file's work went past an execution budget (while_loop iterations, wall time, i64 arithmetic).

    `.budget` names the budget; the message says how to raise it (keyword and CLI flag) where it can be.
    """

    def __init__(self, message: str, budget: str = "") -> None:
        self.budget = budget
        super().__init__(message)


class OpValidationError(OpwireError):
    """Op validation could not run (bad target, library that fails to load)."""


def first_line(exc: BaseException) -> str:
    """The first line of a foreign exception's message (its type name when the message is empty)."""
    text = str(exc).strip()
    return text.splitlines()[0].rstrip() if text else type(exc).__name__


def describe_exception(exc: BaseException) -> str:
    """`Type: first line` of a foreign exception (just `Type` when it has no message)."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {first_line(exc)}" if text else type(exc).__name__


_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def printable(text: str) -> str:
    """`text` safe to print on one terminal line: control characters, escape sequences, line and paragraph
    separators and bidi overrides shown as `\\n`, `\\x1b`, `\\u202e`, ... (printable text is unchanged).

    Every message and line that embeds a name from a file goes through this, so one error is one line."""
    if text.isprintable():
        return text
    out = []
    for ch in text:
        if ch.isprintable():
            out.append(ch)
        elif ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        else:
            code = ord(ch)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
    return "".join(out)
