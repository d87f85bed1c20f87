"""Which bytes of a storage a write covers: the elements of a (strided) view, or the positions an indexed write
names by its index values.

The recorder's definedness rule (`definedness.py`) needs it: memory from `empty*` is undefined until recorded
calls have written all of it, and programs fill such memory piece by piece, through slices and columns
(`x[:k] = a; x[k:] = b`) or through index tensors (transformers' `inv = empty_like(perm); inv[perm] = arange(n)`,
a permutation that writes every element). A write is known as the sorted, merged byte spans `[start, end)` of the
storage it covers. Memory stays bounded: positions are worked out for at most `MAX_ELEMENTS` elements and kept as
at most `MAX_SPANS` spans; past either, the write is not counted (its memory stays undefined, so its values go
uncompared, never reported as a difference).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping
from typing import Any

import torch

__all__ = ["MAX_ELEMENTS", "MAX_SPANS", "Spans", "covered", "indexed_spans", "indexed_write", "union", "view_spans"]

Spans = list[tuple[int, int]]
"""Sorted, disjoint, non-adjacent byte spans `[start, end)` of one storage."""
MAX_ELEMENTS = 1 << 22
"""Elements whose positions a write's coverage is worked out for at most (a view's, an index's mask)."""
MAX_SPANS = 1 << 14
"""Spans a storage's written set keeps at most (a finely interleaved write past it is not counted)."""


def view_spans(t: torch.Tensor) -> Spans | None:
    """The byte spans of its storage that `t`'s elements occupy (None: too many elements to work out)."""
    if t.numel() == 0:
        return []
    size, offset = t.element_size(), int(t.storage_offset())
    if _dense(t):
        end = offset + sum((n - 1) * s for n, s in zip(t.shape, t.stride(), strict=True)) + 1
        return [(offset * size, end * size)]
    if t.numel() > MAX_ELEMENTS:
        return None
    return _spans(torch.unique(_offsets(t)), size)


def covered(written: Spans, spans: Spans) -> bool:
    """Whether every span of `spans` lies within one span of `written` (both sorted and merged)."""
    starts = [s for s, _ in written]
    for start, end in spans:
        k = bisect.bisect_right(starts, start) - 1
        if start < end and (k < 0 or written[k][1] < end):
            return False
    return True


def union(written: Spans, spans: Spans) -> Spans | None:
    """`written` and `spans` merged (None: more than `MAX_SPANS` spans, too fine to keep)."""
    merged: Spans = []
    for s, e in sorted([*written, *spans]):
        if merged and s <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], e))
        elif s < e:
            merged.append((s, e))
    return merged if len(merged) <= MAX_SPANS else None


def indexed_write(target: str, bound: Mapping[str, Any]) -> str | None:
    """The argument a call writes at positions its index values name, keeping the rest (None: no such call).

    `index_put_` and `put_` (not accumulating), `index_copy_`, `index_fill_`, `scatter_` (not reducing),
    `masked_fill_` and `masked_scatter_`: each overwrites the positions it names without reading them, and leaves
    the others as they were, so its `self` is written there and read nowhere else.
    """
    mark = _MARKS.get(_name(target))
    if mark is None or not isinstance(bound.get("self"), torch.Tensor):
        return None
    if bound.get("accumulate") or bound.get("reduce") is not None:
        return None  # reads what the positions held
    return "self"


def indexed_spans(target: str, bound: Mapping[str, Any]) -> Spans | None:
    """The byte spans of `self`'s storage an indexed write (`indexed_write`) writes (None: cannot say)."""
    mark = _MARKS.get(_name(target))
    t = bound.get("self")
    if mark is None or not isinstance(t, torch.Tensor) or t.numel() > MAX_ELEMENTS:
        return None
    mask = torch.zeros(t.shape, dtype=torch.bool)
    try:
        mark(mask, bound)
    except (RuntimeError, IndexError, KeyError, TypeError, ValueError):
        return None  # the call's own arguments are wrong: it raises itself, or its positions are not known
    if bool(mask.all()):
        return view_spans(t)
    if t.is_contiguous():  # the positions in order are the element offsets, less the view's own
        return _spans(mask.flatten().nonzero().flatten() + int(t.storage_offset()), t.element_size())
    return _spans(torch.unique(_offsets(t)[mask]), t.element_size())


def _name(target: str) -> str:
    namespace, _, rest = target.partition("::")
    return rest.split(".")[0] if namespace == "aten" else ""


def _cpu(v: Any) -> Any:
    return v.cpu() if isinstance(v, torch.Tensor) else v


def _index_put(mask: torch.Tensor, bound: Mapping[str, Any]) -> None:
    indices = tuple(_cpu(i) for i in bound["indices"])
    mask.index_put_(indices, torch.ones((), dtype=torch.bool))  # a None index: the whole dimension


def _along(mask: torch.Tensor, bound: Mapping[str, Any]) -> None:
    mask.index_fill_(int(bound["dim"]), _cpu(bound["index"]), True)


def _scatter(mask: torch.Tensor, bound: Mapping[str, Any]) -> None:
    mask.scatter_(int(bound["dim"]), _cpu(bound["index"]), True)


def _masked(mask: torch.Tensor, bound: Mapping[str, Any]) -> None:
    mask.masked_fill_(_cpu(bound["mask"]), True)


def _put(mask: torch.Tensor, bound: Mapping[str, Any]) -> None:
    index = _cpu(bound["index"])
    mask.put_(index, torch.ones(index.shape, dtype=torch.bool))  # positions in `self` read as if flattened


_MARKS: dict[str, Callable[[torch.Tensor, Mapping[str, Any]], None]] = {
    "index_put_": _index_put,
    "_index_put_impl_": _index_put,
    "index_copy_": _along,
    "index_fill_": _along,
    "scatter_": _scatter,
    "masked_fill_": _masked,
    "masked_scatter_": _masked,
    "put_": _put,
}
"""Indexed writes: how each marks, in a boolean mask shaped like `self`, the positions it writes."""


def _dense(t: torch.Tensor) -> bool:
    """Whether `t`'s elements fill the span from its first to its last without gaps or overlap."""
    expected = 1
    for n, s in sorted(((n, s) for n, s in zip(t.shape, t.stride(), strict=True) if n != 1), key=lambda d: d[1]):
        if s != expected:
            return False
        expected *= n
    return True


def _offsets(t: torch.Tensor) -> torch.Tensor:
    """The storage element offset of each element of `t` (shaped like `t`)."""
    offsets = torch.full((), int(t.storage_offset()), dtype=torch.int64)
    for n, s in zip(t.shape, t.stride(), strict=True):
        offsets = offsets.unsqueeze(-1) + torch.arange(n, dtype=torch.int64) * s
    return offsets


def _spans(offsets: torch.Tensor, size: int) -> Spans | None:
    """The byte spans of sorted, distinct element offsets (None: more than `MAX_SPANS`)."""
    if offsets.numel() == 0:
        return []
    breaks = torch.nonzero(offsets[1:] - offsets[:-1] != 1).flatten()
    if breaks.numel() >= MAX_SPANS:
        return None
    starts = torch.cat([offsets[:1], offsets[breaks + 1]]).tolist()
    ends = torch.cat([offsets[breaks], offsets[-1:]]).tolist()
    return [(s * size, (e + 1) * size) for s, e in zip(starts, ends, strict=True)]
