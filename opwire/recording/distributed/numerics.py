"""What a collective must produce on every rank from all ranks' recorded inputs, and where a rank's outputs differ.

Reductions are computed in float64 (integers exactly) and compared within the dtype's tolerance scaled by
the sum of the magnitudes reduced (the ranks may add in any order); data movement (gather, broadcast,
all-to-all, scatter, send/receive) must be bitwise equal (NaN equal to NaN).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from opwire.recording.compare import tolerance
from opwire.recording.distributed.sequence import CollectiveCall, Names

__all__ = ["Disagreement", "check_collective", "check_p2p"]

Load = Callable[[int, str], torch.Tensor]
"""(rank, tensor name) -> the recorded tensor."""

_REDUCTIONS = ("SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR")


@dataclass(frozen=True)
class Disagreement:
    """A rank whose recorded output is not what the collective must produce."""

    rank: int
    what: str  # "output 0", "output [1][0]"
    detail: str


def _at(names: Names, path: tuple[int, ...]) -> str:
    x: object = names
    for p in path:
        x = x[p]  # type: ignore[index]
    return str(x)


def _reduce(op: str, xs: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The reduction of `xs` (float64 for floating inputs) and the magnitude scale for its tolerance."""
    floating = xs[0].is_floating_point() or xs[0].is_complex()
    if floating and all(x.dtype == xs[0].dtype for x in xs):  # one conversion of the stack: the same values
        stack = torch.stack(xs).to(torch.complex128 if xs[0].is_complex() else torch.float64)
        ys = list(stack)
    else:
        ys = [x.to(torch.complex128 if x.is_complex() else torch.float64) if floating else x for x in xs]
        stack = torch.stack(ys)
    scale = stack.abs().sum(0) if floating else None
    if op == "SUM":
        return stack.sum(0), scale
    if op == "AVG":
        return stack.sum(0) / len(xs) if floating else stack.sum(0) // len(xs), scale / len(
            xs
        ) if scale is not None else None
    if op == "PRODUCT":
        return stack.prod(0), stack.abs().prod(0) if floating else None
    if op == "MIN":
        return stack.amin(0), None
    if op == "MAX":
        return stack.amax(0), None
    out = ys[0].clone()
    for y in ys[1:]:
        out = {"BAND": torch.bitwise_and, "BOR": torch.bitwise_or, "BXOR": torch.bitwise_xor}[op](out, y)
    return out, None


def _differs(got: torch.Tensor, want: torch.Tensor, scale: torch.Tensor | None) -> str | None:
    """Why `got` is not `want` (None when it is, within tolerance for a reduction)."""
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
    if not want.is_complex() and not _beyond(got.to(want.dtype, copy=True), want, scale, rtol, atol):
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


def _beyond(g: torch.Tensor, want: torch.Tensor, scale: torch.Tensor, rtol: float, atol: float) -> bool:
    """Whether some element of `g` (overwritten) is beyond `atol + rtol * scale` of `want`, or NaN where `want`
    is not (or the reverse): `_differs`'s test with the same operations, without a temporary per step."""
    nan = g.isnan().ne_(want.isnan())
    err = g.sub_(want).abs_()
    return bool(err.gt_(scale.mul(rtol).add_(atol)).logical_or_(nan).any())


def _expected(
    calls: Sequence[CollectiveCall], load: Load
) -> dict[tuple[int, tuple[int, ...]], tuple[torch.Tensor, torch.Tensor | None]]:
    """(group rank, output path) -> (expected value, tolerance scale or None for exact)."""
    first = calls[0]
    kind, w = first.spec.kind, len(calls)
    ins = [c.inputs for c in calls]

    def tensor(j: int, path: tuple[int, ...]) -> torch.Tensor:
        return load(calls[j].rank, _at(ins[j], path))

    red = str(first.scalar(first.spec.reduce) or "").upper()
    out: dict[tuple[int, tuple[int, ...]], tuple[torch.Tensor, torch.Tensor | None]] = {}
    if kind in ("all_reduce", "reduce", "reduce_scatter", "reduce_scatter_cat") and red not in _REDUCTIONS:
        return out  # PREMUL_SUM and unknown reductions are not checked
    if kind == "all_reduce":
        for k in range(len(ins[0])):
            value = _reduce(red, [tensor(j, (k,)) for j in range(w)])
            out.update({(i, (k,)): value for i in range(w)})
    elif kind == "reduce":
        root = int(first.scalar(first.spec.root))
        for k in range(len(ins[0])):
            out[(root, (k,))] = _reduce(red, [tensor(j, (k,)) for j in range(w)])
    elif kind == "all_gather":
        for k in range(len(ins[0])):
            out.update({(i, (k, j)): (tensor(j, (k,)), None) for i in range(w) for j in range(w)})
    elif kind == "cat":
        for k in range(len(ins[0])):
            gathered = torch.cat([tensor(j, (k,)) for j in range(w)])
            out.update({(i, (k,)): (gathered, None) for i in range(w)})
    elif kind == "reduce_scatter":
        for k in range(len(ins[0])):
            out.update({(i, (k,)): _reduce(red, [tensor(j, (k, i)) for j in range(w)]) for i in range(w)})
    elif kind == "reduce_scatter_cat":
        for k in range(len(ins[0])):
            chunks = [tensor(j, (k,)).chunk(w) for j in range(w)]
            out.update({(i, (k,)): _reduce(red, [chunks[j][i] for j in range(w)]) for i in range(w)})
    elif kind == "broadcast":
        root = int(first.scalar(first.spec.root))
        for k in range(len(ins[0])):
            out.update({(i, (k,)): (tensor(root, (k,)), None) for i in range(w)})
    elif kind == "all_to_all":
        out.update({(i, (j,)): (tensor(j, (i,)), None) for i in range(w) for j in range(w)})
    elif kind == "all_to_all_single":
        parts = [_split(tensor(j, (0,)), calls[j].scalar("input_split_sizes"), w) for j in range(w)]
        out.update({(i, (0,)): (torch.cat([p[i] for p in parts]), None) for i in range(w)})
    elif kind == "gather":
        root = int(first.scalar(first.spec.root))
        out.update({(root, (0, j)): (tensor(j, (0,)), None) for j in range(w)})
    elif kind == "scatter":
        root = int(first.scalar(first.spec.root))
        out.update({(i, (0,)): (tensor(root, (0, i)), None) for i in range(w)})
    return out


def _split(t: torch.Tensor, sizes: object, w: int) -> list[torch.Tensor]:
    if isinstance(sizes, list) and sizes:
        return list(torch.split(t, [int(s) for s in sizes]))
    return list(t.chunk(w))


def check_collective(
    calls: Sequence[CollectiveCall], load: Load, key: Callable[[int, str], object | None] | None = None
) -> list[Disagreement]:
    """The ranks (in group-rank order of `calls`) whose recorded outputs differ from what the collective must give.

    `key(rank, name)` identifies a recorded value (layout and payload digest): outputs with one key that must
    equal one expected value (every rank's result of an all-reduce) are read and compared once."""
    found = []
    seen: dict[tuple[int, object], str | None] = {}
    for (i, path), (want, scale) in sorted(_expected(calls, load).items(), key=lambda kv: kv[0]):
        name = _at(calls[i].outputs, path)
        k = key(calls[i].rank, name) if key is not None else None
        memo = (id(want), k) if k is not None else None  # `want` objects live until the loop ends
        if memo is not None and memo in seen:
            why = seen[memo]
        else:
            why = _differs(load(calls[i].rank, name), want, scale)
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
