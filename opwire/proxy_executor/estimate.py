"""The memory estimate's two parts: a node's output bytes computed on the `meta` device, and the shape key.

`output_bytes` runs the op on meta copies of its tensors (nothing allocated) and sums what its outputs own;
`shape_key` is what an estimate holds for (each tensor's shape and dtype, every other argument's value), built
in one pass from kinds fixed at bind time (`shape_kinds`), so a node run again on the same shapes reuses it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cache
from typing import Any

__all__ = ["output_bytes", "shape_key", "shape_kinds"]

_VALUE, _TENSORS, _LIST = 0, 1, 2
"""Kinds of argument: a tensor or a plain value; a list that may hold tensors; a list of numbers."""

_ABSENT = object()  # an argument not passed (its schema default applies)


@cache
def _tensor_type() -> Any:
    from torch import Tensor  # deferred: the executor's modules import without torch until a call runs

    return Tensor


def shape_kinds(arguments: Sequence[Any]) -> tuple[tuple[int, str, int], ...]:
    """(position, name, kind) of each schema argument (`OpArg`: `.name`, `.type`), for `shape_key`."""
    out = []
    for i, a in enumerate(arguments):
        listed = "[" in a.type
        kind = _TENSORS if listed and ("Tensor" in a.type or "Scalar" in a.type) else _LIST if listed else _VALUE
        out.append((i, a.name, kind))
    return tuple(out)


def shape_key(kinds: tuple[tuple[int, str, int], ...], pos: list[Any], kw: dict[str, Any]) -> list[Any]:
    """A key of the tensors' shapes, dtypes and layouts, or the values themselves (lists copied to tuples)."""
    tensor, n = _tensor_type(), len(pos)
    key: list[Any] = []
    for i, name, kind in kinds:
        v = pos[i] if i < n else kw.get(name, _ABSENT)
        if kind == _VALUE and isinstance(v, tensor):
            key.append((v.shape, v.dtype, v.layout))  # what output sizes depend on (sparse: a larger bound)
        elif kind == _LIST and type(v) is list:
            key.append(tuple(v))
        elif isinstance(v, (list, tuple)):
            key.append(tuple([(e.shape, e.dtype, e.layout) if isinstance(e, tensor) else e for e in v]))
        else:
            key.append(v)
    return key


def output_bytes(fn: Callable[..., Any], pos: list[Any], kw: dict[str, Any], device_arg: bool) -> int | None:
    """The bytes the call's tensor outputs would own, computed on the meta device (None: no meta kernel).

    Every tensor argument is replaced by a meta tensor of its shape, and a factory (`device_arg`) gets
    device=meta, so nothing is allocated. A non-strided tensor (sparse, which has no strides) is replaced by a
    dense one of its shape, the most a result of that shape can hold; then every output is counted at its bound
    as a sparse result too (`_sparse_bound`), and one that is the stand-in itself (to_dense) counts as new."""
    import torch

    strided, stand_ins = torch.strided, []

    def meta(v: Any) -> Any:
        if isinstance(v, torch.Tensor):
            if v.layout is not strided:
                stand_ins.append(torch.empty(v.size(), dtype=v.dtype, device="meta"))
                return stand_ins[-1]
            return torch.empty_strided(v.size(), v.stride(), dtype=v.dtype, device="meta")
        if isinstance(v, (list, tuple)):
            return type(v)(meta(e) for e in v)
        return v

    mkw = {k: meta(v) for k, v in kw.items()}
    for k, v in kw.items():  # an out= tensor is resized to the result: an empty one, so the meta run does not warn
        if k.startswith("out") and isinstance(v, torch.Tensor):
            mkw[k] = torch.empty(0, dtype=v.dtype, device="meta")
    if device_arg:
        mkw["device"] = torch.device("meta")
    mpos = [meta(v) for v in pos]
    try:
        out = fn(*mpos, **mkw)
    except Exception:  # no meta kernel, or data-dependent: the kernel itself runs (or raises) as it would
        return None
    kept = [v for k, v in mkw.items() if not k.startswith("out")]  # an out= tensor is resized to the result
    given = {id(t) for t in (*mpos, *kept) if isinstance(t, torch.Tensor)} - {id(t) for t in stand_ins}
    total = 0
    for t in out if isinstance(out, (list, tuple)) else (out,):
        if isinstance(t, torch.Tensor) and t.device.type == "meta" and id(t) not in given and t._base is None:
            # a new tensor (not an input returned, not a view of one): it allocates
            total += _sparse_bound(t) if stand_ins or t.layout is not strided else _storage_bytes(t)
    return total


def _sparse_bound(t: Any) -> int:
    """The most a result of `t`'s shape and dtype takes in any layout: every element stored, with an int64 index
    per dimension (COO's indices; CSR/CSC/BSR/BSC index arrays hold fewer)."""
    return int(t.numel()) * (int(t.element_size()) + 8 * int(t.dim()))


def _storage_bytes(t: Any) -> int:
    if t.numel() == 0:
        return 0
    span = 1 + sum((s - 1) * abs(st) for s, st in zip(t.shape, t.stride(), strict=True))
    return int(span * t.element_size())
