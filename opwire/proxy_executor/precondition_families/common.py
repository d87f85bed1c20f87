"""What every family's check reads: the call's arguments by name, and small shape and value tests."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

__all__ = [
    "Args",
    "Builder",
    "Check",
    "common_rules_only",
    "dense",
    "in_range",
    "ints",
    "is_tensor",
    "non_decreasing",
    "packed_batch_sizes",
    "same_shape",
    "shape_of",
    "static",
]


class Args(dict[str, Any]):
    """A call's arguments by name; `get` of a missing or None argument is None."""

    def get(self, key: str, default: Any = None) -> Any:
        """The argument `key`, or `default` when the call has none."""
        return super().get(key, default)


Check = Callable[[Args], str | None]
"""A family's check of one call: what is wrong, or None."""
Builder = Callable[[str], Check]
"""A family's builder: given the op ("aten::lstm.input"), its check."""


def is_tensor(v: Any) -> bool:
    """Whether `v` is a torch.Tensor (torch imported on first use)."""
    import torch  # deferred: the op policy's tables are read without torch

    return isinstance(v, torch.Tensor)


def dense(t: Any) -> bool:
    """Whether tensor `t` is contiguous, or channels-last contiguous: a buffer a kernel may read as dense."""
    import torch  # deferred: the op policy's tables are read without torch

    if t.is_contiguous():
        return True
    fmt = {4: torch.channels_last, 5: torch.channels_last_3d}.get(t.dim())
    return fmt is not None and bool(t.is_contiguous(memory_format=fmt))


def shape_of(t: Any) -> tuple[int, ...]:
    """Tensor `t`'s shape as plain ints."""
    return tuple(int(s) for s in t.shape)


_INDEX_DTYPES = frozenset(f"torch.{d}" for d in ("int64", "int32", "int16", "int8", "uint8"))


def in_range(t: Any, lo: int, hi: int, what: str) -> str | None:
    """Why `what` (tensor `t`) does not hold integer values in [lo, hi), or None."""
    if str(t.dtype) not in _INDEX_DTYPES:
        return f"{what} must hold integers (int64, int32, int16, int8 or uint8), got {t.dtype}"
    if t.numel() == 0:
        return None
    least, most = int(t.min()), int(t.max())
    if least < lo or most >= hi:
        return f"{what} must lie in [{lo}, {hi}), got values from {least} to {most}"
    return None


def non_decreasing(t: Any, what: str) -> str | None:
    """Why `what` (tensor `t`) is not a non-decreasing 1-D tensor, or None."""
    if t.dim() != 1:
        return f"{what} must be 1-D, got shape {shape_of(t)}"
    if t.numel() > 1 and bool((t[1:] < t[:-1]).any()):
        return f"{what} must be non-decreasing"
    return None


def packed_batch_sizes(b: Any, rows: int) -> str | None:
    """Why packed-sequence batch sizes `b` are not 1-D, positive, non-increasing and summing to `rows`, or None."""
    if b.dim() != 1 or b.numel() == 0:
        return f"batch_sizes must be a non-empty 1-D tensor, got shape {shape_of(b)}"
    if bool((b <= 0).any()) or (b.numel() > 1 and bool((b[1:] > b[:-1]).any())):
        return "batch_sizes must be positive and non-increasing"
    if int(b.sum()) != rows:
        return f"batch_sizes must sum to the {rows} packed rows, got {int(b.sum())}"
    return None


def same_shape(args: Args, names: Sequence[str], shape: tuple[int, ...], what: str) -> str | None:
    """Why one of the tensors `names` in `args` does not have `what`'s shape `shape`, or None."""
    for name in names:
        t = args.get(name)
        if is_tensor(t) and shape_of(t) != shape:
            return f"{name} must have {what}'s shape {shape}, got {shape_of(t)}"
    return None


def ints(v: Any) -> list[int] | None:
    """Integer tensor or list `v` as a list of ints; None for a floating tensor or another kind of value."""
    if is_tensor(v):
        return [int(e) for e in v.reshape(-1).tolist()] if not v.is_floating_point() else None
    return [int(e) for e in v] if isinstance(v, (list, tuple)) else None


def common_rules_only(args: Args) -> str | None:
    """The check of a family whose precondition is the rules every family shares (`preconditions.precondition_for`:
    strided tensors with data, written tensors dense and apart from the inputs) and nothing more."""
    return None


def static(check: Check) -> Builder:
    """The builder of a family whose check is the same for every op it covers."""
    return lambda _op: check
