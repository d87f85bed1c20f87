"""Output sizes of ops whose outputs' shapes their data decides (no meta kernel to estimate them on).

Each rule reads the arguments before the kernel runs and gives the bytes the outputs will take (the memory
check compares them with the budget), None when the call is not one it sizes, or why the values cannot size
it: a tensor with no values to read (meta), a layout (sparse) or dtype (uint16, float8) whose values the rule
cannot reduce. That is a refusal, since the kernel would otherwise allocate what no check bounded.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

__all__ = ["SIZE_RULES", "SizeRule"]

SizeRule = Callable[[list[Any], dict[str, Any]], "int | str | None"]
"""An op's output bytes from its arguments, None (nothing to size) or why the arguments cannot size it."""


@cache
def _torch() -> Any:
    import torch  # deferred: the executor's modules import without torch until a call runs

    return torch


def _unreadable(x: Any, name: str) -> str | None:
    """Why a size rule cannot read the values of `x`, the tensor whose data decides the output's size, or None."""
    if x.layout is not _torch().strided:
        return f"{name} is a {str(x.layout).removeprefix('torch.')} tensor; its values decide the output's size"
    if x.is_meta:
        return f"{name} is a meta tensor: it holds no values, and they decide the output's size"
    if x.dtype not in _readable_dtypes():
        return f"{name} must hold integers (int64, int32, int16, int8, uint8 or bool) to size the output, got {x.dtype}"
    return None


@cache
def _readable_dtypes() -> frozenset[Any]:
    torch = _torch()
    return frozenset({torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool})


def _one_hot_bytes(pos: list[Any], kw: dict[str, Any]) -> int | str | None:
    x = pos[0] if pos else kw.get("self")
    n = pos[1] if len(pos) > 1 else kw.get("num_classes", -1)
    if x is None or n is None:
        return None
    if int(n) < 0:  # num_classes=-1: the data decides (its largest value + 1): read it before allocating
        why = _unreadable(x, "self")
        if why is not None:
            return why
        n = int(x.max()) + 1 if x.numel() else 0
    return int(x.numel()) * max(int(n), 0) * 8


def _nonzero_bytes(pos: list[Any], kw: dict[str, Any]) -> int | str | None:
    x = pos[0] if pos else kw.get("self")
    return None if x is None else int(x.numel()) * max(x.dim(), 1) * 8  # at most every element, int64 coordinates


def _bincount_bytes(pos: list[Any], kw: dict[str, Any]) -> int | str | None:
    x = pos[0] if pos else kw.get("self")
    least = int(pos[2] if len(pos) > 2 else kw.get("minlength", 0) or 0)
    if x is None:
        return None
    why = _unreadable(x, "self")
    if why is not None:
        return why
    top = int(x.max()) + 1 if x.numel() else 0  # the data decides the length: read it before allocating
    return max(top, least, 0) * 8


def _repeat_interleave_bytes(pos: list[Any], kw: dict[str, Any]) -> int | str | None:
    repeats = pos[0] if pos else kw.get("repeats")
    if repeats is None or not hasattr(repeats, "sum"):
        return None
    why = _unreadable(repeats, "repeats")
    if why is not None:
        return why
    return max(int(repeats.sum()), 0) * 8


SIZE_RULES: dict[str, SizeRule] = {
    "aten::one_hot": _one_hot_bytes,
    "aten::nonzero": _nonzero_bytes,
    "aten::argwhere": _nonzero_bytes,
    "aten::bincount": _bincount_bytes,
    "aten::repeat_interleave.Tensor": _repeat_interleave_bytes,
}
"""Ops whose output shape depends on data (no meta kernel): their output bytes from the arguments, or why the
arguments cannot size it (a refusal: the kernel would allocate what no check bounded)."""
