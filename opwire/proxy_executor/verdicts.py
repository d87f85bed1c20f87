"""Precondition verdicts remembered by argument layout, for the preconditions that read no tensor data.

A family's precondition (`precondition_families`) reads shapes, dtypes, strides and argument values, and some
read tensor data too (indices in range, offsets non-decreasing, packed batch sizes). Run on every call, the
shape-only ones cost an LSTM node 15 us of a 120 us kernel. So when a call passes, its precondition runs once
more on `meta` copies of the tensors (same sizes, strides, storage offset and dtype, the least storage that
geometry needs): a data read raises there, and this node's precondition is then run on every call for good.
When the meta run passes as well, the verdict depended on nothing the layout key does not hold (sizes, strides,
offsets, dtypes, devices and every other argument's value), and later calls with that key skip it. A real
tensor's storage is never smaller than its geometry needs, so a check that passed with the least storage passes
with any (checks compare extents against storage sizes, never the other way round).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

__all__ = ["Verdicts"]

Check = Callable[[list[Any], dict[str, Any]], str | None]

_REMEMBERED = 16
"""Layouts remembered per node (the oldest forgotten first)."""

_PLAIN = (int, float, bool, str, type(None))


class Verdicts:
    """The layouts a node's precondition passed on, when it reads no tensor data."""

    __slots__ = ("always", "names", "passed", "reads_data")

    def __init__(self, names: tuple[tuple[int, str], ...]) -> None:
        self.names = names  # (position, name) of every schema argument
        self.passed: dict[tuple[Any, ...], None] = {}
        self.reads_data = False
        self.always = True
        """Every passing call so far was remembered (keyable, no data read): a verdict that follows from layouts."""

    def key(self, pos: list[Any], kw: dict[str, Any]) -> tuple[Any, ...] | None:
        """The call's layout (None: an argument no key holds, e.g. a sparse tensor or an unhashable object)."""
        if self.reads_data:
            return None
        tensor, n, key = _torch().Tensor, len(pos), []
        try:
            for i, name in self.names:
                v = pos[i] if i < n else kw.get(name, _ABSENT)
                if isinstance(v, tensor):
                    key.append(_element(v, tensor))
                elif isinstance(v, (list, tuple)):
                    key.append(tuple([_element(e, tensor) for e in v]))
                elif isinstance(v, _PLAIN) or v is _ABSENT or type(v).__module__ == "torch":  # dtype, device...
                    key.append(v)
                else:
                    return None
            out = tuple(key)
            hash(out)
        except TypeError:  # a sparse tensor, an unhashable value
            return None
        return out

    def check(self, pre: Check, pos: list[Any], kw: dict[str, Any], key: tuple[Any, ...] | None) -> str | None:
        """`pre(pos, kw)`, or None at once when layout `key` (from `key`) passed before."""
        if key is not None and key in self.passed:
            return None
        wrong = pre(pos, kw)
        if wrong is None and key is not None and self._passes_on_meta(pre, pos, kw):
            if len(self.passed) >= _REMEMBERED:
                del self.passed[next(iter(self.passed))]
            self.passed[key] = None
        elif wrong is None:
            self.always = False
        return wrong

    def _passes_on_meta(self, pre: Check, pos: list[Any], kw: dict[str, Any]) -> bool:
        try:
            meta_run = getattr(pre, "on_meta", pre)  # a family check's shared rules would refuse the copies
            return meta_run([_meta(v) for v in pos], {k: _meta(v) for k, v in kw.items()}) is None
        except Exception:  # a data read (or anything the meta device cannot answer): checked on every call
            self.reads_data = True
            return False


_ABSENT = object()


@cache
def _torch() -> Any:
    import torch  # deferred: the executor's modules import without torch until a call runs

    return torch


def _element(e: Any, tensor: Any) -> Any:
    if isinstance(e, tensor):
        if e.layout is not _torch().strided:
            raise TypeError("not a dense tensor")
        return (e.shape, e.stride(), e.storage_offset(), e.dtype, e.device)
    if e is None or isinstance(e, _PLAIN):
        return e
    raise TypeError("not a key")


def _meta(v: Any) -> Any:
    """`v` with each tensor replaced by a meta tensor of the same geometry and the least storage it needs."""
    torch = _torch()
    if isinstance(v, torch.Tensor):
        need = v.storage_offset() + 1 + sum((s - 1) * st for s, st in zip(v.shape, v.stride(), strict=True))
        if v.numel() == 0:
            need = v.storage_offset()
        base = torch.empty(need, dtype=v.dtype, device="meta")
        return base.as_strided(v.shape, v.stride(), v.storage_offset())
    if isinstance(v, (list, tuple)):
        return type(v)(_meta(e) for e in v)
    return v
