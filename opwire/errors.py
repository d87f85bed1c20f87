"""opwire's exception hierarchy: one root, importable by every layer."""

from __future__ import annotations

__all__ = [
    "BindError",
    "DecodeError",
    "EncodeError",
    "KernelError",
    "OpValidationError",
    "OpwireError",
    "UnknownTargetError",
]


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


class OpValidationError(OpwireError):
    """Op validation could not run (bad target, library that fails to load)."""
