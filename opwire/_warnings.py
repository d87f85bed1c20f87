"""Warnings opwire emits (pytest turns these into errors in the test suite)."""

from __future__ import annotations

__all__ = ["OpwireWarning"]


class OpwireWarning(UserWarning):
    """Base of every warning opwire emits."""
