"""Where a rank's recorded outputs differ from what the collective must produce from all ranks' recorded inputs.

What each kind must produce is its row of `collective_rules.RULES`. Reductions are compared within the dtype's
tolerance scaled by the sum of the magnitudes reduced (the ranks may add in any order); data movement (gather,
broadcast, all-to-all, scatter, send/receive) must be bitwise equal (NaN equal to NaN).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from opwire.recording.compare import tolerance
from opwire.recording.distributed.collective_rules import (
    REDUCTIONS,
    RULES,
    Arena,
    Expected,
    Load,
    Recorded,
    lend,
    name_at,
)
from opwire.recording.distributed.sequence import CollectiveCall

__all__ = ["Disagreement", "check_collective", "check_p2p"]


@dataclass(frozen=True)
class Disagreement:
    """A rank whose recorded output is not what the collective must produce."""

    rank: int
    what: str  # "output 0", "output [1][0]"
    detail: str


def _differs(
    got: torch.Tensor, want: torch.Tensor, scale: torch.Tensor | None, arena: Arena | None = None
) -> str | None:
    """Why `got` is not `want` (None when it is, within tolerance for a reduction); `arena` lends the temporaries."""
    if list(got.shape) != list(want.shape):
        return f"shape {list(got.shape)}, expected {list(want.shape)}"
    if got.numel() == 0:
        return None
    if scale is None:
        w = want.to(got.dtype) if want.dtype != got.dtype else want
        same = (got == w) | (got.isnan() & w.isnan()) if got.is_floating_point() else got == w
        if bool(same.all()):
            return None
        k = int((~same).flatten().nonzero()[0])
        return f"element {k} is {got.flatten()[k].item()!r}, expected {w.flatten()[k].item()!r}"
    rtol, atol = tolerance(got.dtype, None, None)
    if not want.is_complex() and not _beyond(got, want, scale, rtol, atol, arena):
        return None  # the usual case, tested in place on a copy; the message below is rare
    g = got.to(want.dtype)
    err = (g - want).abs()
    bound = atol + rtol * scale
    bad = (err > bound) | (g.isnan() != want.isnan())
    if not bool(bad.any()):
        return None
    k = int(bad.flatten().nonzero()[0])
    return (
        f"element {k} is {g.flatten()[k].item():.6g}, expected {want.flatten()[k].item():.6g} "
        f"(max abs diff {float(err.nan_to_num(float('inf')).max()):.3g}, rtol={rtol:g}, atol={atol:g})"
    )


def _beyond(
    got: torch.Tensor, want: torch.Tensor, scale: torch.Tensor, rtol: float, atol: float, arena: Arena | None
) -> bool:
    """Whether some element of `got` is beyond `atol + rtol * scale` of `want`, or NaN where `want` is not (or the
    reverse): `_differs`'s test with the same operations on a copy of `got`, in place, each temporary lent by
    `arena` (fresh without one). A real `want` only: `isnan` has no `out=`, and x != x is what it tests there."""
    g = lend(arena, got.shape, want.dtype).copy_(got)
    nan = torch.ne(g, g, out=lend(arena, g.shape, torch.bool))
    nan.ne_(torch.ne(want, want, out=lend(arena, want.shape, torch.bool)))
    bound = torch.mul(scale, rtol, out=lend(arena, scale.shape, scale.dtype))
    err = g.sub_(want).abs_()
    return bool(err.gt_(bound.add_(atol)).logical_or_(nan).any())


def _expected(calls: Sequence[CollectiveCall], load: Load, arena: Arena | None) -> Expected:
    """(group rank, output path) -> (expected value, tolerance scale or None for exact), from the kind's rule."""
    first = calls[0]
    expect = RULES[first.spec.kind].expect
    red = str(first.scalar(first.spec.reduce) or "").upper()
    if expect is None or (first.spec.reduce and red not in REDUCTIONS):
        return {}  # PREMUL_SUM and unknown reductions are not checked
    return expect(Recorded(calls, load, red, arena))


def check_collective(
    calls: Sequence[CollectiveCall], load: Load, key: Callable[[int, str], object | None] | None = None,
    arena: Arena | None = None,
) -> list[Disagreement]:  # fmt: skip
    """The ranks (in group-rank order of `calls`) whose recorded outputs differ from what the collective must give.

    `key(rank, name)` identifies a recorded value (layout and payload digest): outputs with one key that must
    equal one expected value (every rank's result of an all-reduce) are read and compared once. `arena` lends the
    reductions' buffers and temporaries; they are taken back when the check ends."""
    try:
        return _check(calls, load, key, arena)
    finally:
        if arena is not None:
            arena.release()


def _check(
    calls: Sequence[CollectiveCall], load: Load, key: Callable[[int, str], object | None] | None, arena: Arena | None
) -> list[Disagreement]:
    found = []
    seen: dict[tuple[int, object], str | None] = {}
    for (i, path), (want, scale) in sorted(_expected(calls, load, arena).items(), key=lambda kv: kv[0]):
        name = name_at(calls[i].outputs, path)
        k = key(calls[i].rank, name) if key is not None else None
        memo = (id(want), k) if k is not None else None  # `want` objects live until the loop ends
        if memo is not None and memo in seen:
            why = seen[memo]
        else:
            why = _differs(load(calls[i].rank, name), want, scale, arena)
            if memo is not None:
                seen[memo] = why
        if why is not None:
            where = "".join(f"[{p}]" for p in path)
            found.append(Disagreement(calls[i].rank, f"output {where}", why))
    return found


def check_p2p(send: CollectiveCall, recv: CollectiveCall, load: Load) -> Disagreement | None:
    """A receive whose recorded tensor is not what the matching send sent."""
    for k, (a, b) in enumerate(zip(send.inputs, recv.outputs, strict=False)):
        why = _differs(load(recv.rank, str(b)), load(send.rank, str(a)), None)
        if why is not None:
            return Disagreement(recv.rank, f"received tensor [{k}]", why)
    return None
