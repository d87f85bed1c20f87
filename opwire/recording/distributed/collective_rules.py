"""One row per collective kind: how a replay under torchrun runs it, and what it must produce on every rank.

`RULES` is keyed by `recording.collectives.Kind`, the kinds the recorder's table (`COLLECTIVES`) gives c10d ops;
`tests/recording/distributed/test_dist_collectives.py` checks that the two cover the same kinds, so a kind cannot
be recorded without a replay and a check. A row's `run` issues the call on live tensors in the replay's process
group (`execute.run_collective` prepares them); its `expect` recomputes every member's outputs from all ranks'
recorded inputs (`numerics.check_collective` compares them). Reductions are computed in float64 (integers
exactly), with the sum of the magnitudes reduced as the scale of their tolerance, into an `Arena`'s buffers
where the caller gives one (the same buffers from one check to the next: no fresh pages per collective).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from opwire.recording.collectives import Kind
from opwire.recording.distributed.sequence import CollectiveCall, Names

__all__ = [
    "REDUCTIONS",
    "RULES",
    "Arena",
    "Expected",
    "Load",
    "Recorded",
    "Rule",
    "Running",
    "lend",
    "name_at",
    "reduce",
]

Load = Callable[[int, str], torch.Tensor]
"""(rank, tensor name) -> the recorded tensor."""

Expected = dict[tuple[int, tuple[int, ...]], tuple[torch.Tensor, torch.Tensor | None]]
"""(group rank, output path) -> (expected value, tolerance scale or None for bitwise equal)."""

REDUCTIONS = ("SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR")
"""The reductions a check recomputes (PREMUL_SUM and unknown ones are not checked)."""


def name_at(names: Names, path: tuple[int, ...]) -> str:
    """The tensor name at `path` of shaped `names` ((k,) for the k-th tensor, (k, j) inside a nested list)."""
    x: object = names
    for p in path:
        x = x[p]  # type: ignore[index]
    return str(x)


class Arena:
    """Buffers lent to one numeric check and taken back after it (`release`), to lend to the next.

    A check's float64 stacks and results are as large as its tensors; allocated fresh per collective they cost
    more than the arithmetic (every page faulted in anew, 2k to 60k faults per `ranks` run depending on the heap's
    state). A lent tensor's bytes are whatever an earlier check left: every user writes all of it before reading.
    Buffers come in power-of-two byte sizes; what is kept between checks beyond `keep` bytes is dropped, except
    the buffers the last check used (one collective's worth, as the checks hold anyway)."""

    def __init__(self, keep: int = 256 << 20) -> None:
        self.keep = keep
        self._free: dict[int, list[torch.Tensor]] = {}  # bytes -> unlent uint8 buffers of that size
        self._lent: list[torch.Tensor] = []

    def empty(self, shape: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
        """A contiguous tensor of `shape` and `dtype` (bytes unspecified), this check's alone until `release`."""
        nbytes = math.prod(shape) * dtype.itemsize
        size = 1 << max(nbytes - 1, 0).bit_length()
        pool = self._free.get(size)
        buf = pool.pop() if pool else torch.empty(size, dtype=torch.uint8)
        self._lent.append(buf)
        return buf[:nbytes].view(dtype).view(tuple(shape))

    @property
    def nbytes(self) -> int:
        """Bytes of the buffers held, lent or not."""
        return sum(b.numel() for b in self._lent) + sum(b.numel() for pool in self._free.values() for b in pool)

    def release(self) -> None:
        """Take back every lent buffer (the tensors lent must not be used after this)."""
        kept = sum(b.numel() for pool in self._free.values() for b in pool)
        for size in sorted(self._free, reverse=True):  # the largest of those the last check did not use go first
            pool = self._free[size]
            while pool and kept > self.keep:
                kept -= pool.pop().numel()
        for b in self._lent:
            self._free.setdefault(b.numel(), []).append(b)
        self._lent.clear()


def lend(arena: Arena | None, shape: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
    """A contiguous tensor of `shape` and `dtype` (bytes unspecified): `arena`'s buffer, or a fresh one without it."""
    return arena.empty(shape, dtype) if arena is not None else torch.empty(tuple(shape), dtype=dtype)


def reduce(op: str, xs: list[torch.Tensor], arena: Arena | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The reduction of `xs` (float64 for floating inputs) and the magnitude scale for its tolerance; with `arena`,
    the stack and the floating results are its buffers (the same bits: the same kernels write into them)."""
    floating = xs[0].is_floating_point() or xs[0].is_complex()
    if floating and all(x.dtype == xs[0].dtype and x.shape == xs[0].shape for x in xs):
        # the stack `torch.stack(xs).to(wide)` gives, each input converted as it is copied in (one pass, not two)
        wide = torch.complex128 if xs[0].is_complex() else torch.float64
        stack = lend(arena, (len(xs), *xs[0].shape), wide)
        for k, x in enumerate(xs):
            stack[k].copy_(x)
        ys = list(stack)
    else:
        ys = [x.to(torch.complex128 if x.is_complex() else torch.float64) if floating else x for x in xs]
        stack = torch.stack(ys)
    if not floating:
        return _integral(op, stack, ys)
    shape, real = stack.shape[1:], torch.float64
    if op in ("SUM", "AVG", "PRODUCT"):
        fold = torch.sum if op != "PRODUCT" else torch.prod
        value = fold(stack, 0, out=lend(arena, shape, stack.dtype))
        mags = torch.abs(stack, out=lend(arena, stack.shape, real)) if stack.is_complex() else stack.abs_()
        scale = fold(mags, 0, out=lend(arena, shape, real))  # over `reduce`'s own stack: no second fresh stack
        if op == "AVG":
            return value.div_(len(xs)), scale.div_(len(xs))
        return value, scale
    if op in ("MIN", "MAX"):
        return (torch.amin if op == "MIN" else torch.amax)(stack, 0, out=lend(arena, shape, stack.dtype)), None
    return _integral(op, stack, ys)


def _integral(op: str, stack: torch.Tensor, ys: list[torch.Tensor]) -> tuple[torch.Tensor, None]:
    """An integer reduction (exact), or a bitwise one."""
    if op in ("SUM", "AVG"):
        total = stack.sum(0)
        return (total if op == "SUM" else total // len(ys)), None
    if op == "PRODUCT":
        return stack.prod(0), None
    if op in ("MIN", "MAX"):
        return (stack.amin(0) if op == "MIN" else stack.amax(0)), None
    out = ys[0].clone()
    for y in ys[1:]:
        out = {"BAND": torch.bitwise_and, "BOR": torch.bitwise_or, "BXOR": torch.bitwise_xor}[op](out, y)
    return out, None


@dataclass(frozen=True)
class Running:
    """One recorded collective ready to run: its group, reduction and root, and the live tensors it takes."""

    call: CollectiveCall
    pg: Any  # the replay's ProcessGroup
    members: list[int]  # global rank of each group rank
    op: Any  # the dist.ReduceOp (SUM where the collective reduces nothing)
    root: int  # group rank of the root, or of the peer of a send or receive
    ins: Any  # live input tensors, shaped as `call.inputs`
    outs: Any  # live tensors that receive the results, shaped as `call.outputs`

    def results_start_as_inputs(self) -> None:
        """A functional collective returns new tensors: they start as copies of the inputs it reduces in place."""
        if self.call.spec.outputs == "return":
            for o, i in zip(self.outs, self.ins, strict=True):
                o.copy_(i)

    def pairs(self) -> Any:
        """(output, input) per tensor the call takes."""
        return zip(self.outs, self.ins, strict=True)

    def tag(self) -> int:
        """The tag of a send or receive."""
        return int(self.call.scalar("tag") or 0)


@dataclass(frozen=True)
class Recorded:
    """One collective as every member rank recorded it (in group-rank order), and a reader of their tensors."""

    calls: Sequence[CollectiveCall]
    load: Load
    red: str  # the reduction ("" where the collective reduces nothing)
    arena: Arena | None = None  # where reductions are computed (fresh tensors when None)

    @property
    def w(self) -> int:
        """The group's size."""
        return len(self.calls)

    @property
    def n(self) -> int:
        """How many tensors (or tensor lists) the collective takes per rank."""
        return len(self.calls[0].inputs)

    def root(self) -> int:
        """The group rank of the root."""
        first = self.calls[0]
        return int(first.scalar(first.spec.root))

    def tensor(self, j: int, path: tuple[int, ...]) -> torch.Tensor:
        """Group rank `j`'s recorded input at `path`."""
        return self.load(self.calls[j].rank, name_at(self.calls[j].inputs, path))

    def reduced(self, xs: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor | None]:
        """`xs` reduced with the call's reduction, and the scale of its tolerance."""
        return reduce(self.red, xs, self.arena)


@dataclass(frozen=True)
class Rule:
    """How a replay runs one kind of collective, and what it must produce."""

    run: Callable[[Running], None] | None  # None: no communication, the call returns its input (wait)
    expect: Callable[[Recorded], Expected] | None  # None: no outputs checked across the group (see `why`)
    why: str = ""  # why a kind has no `expect`


# -------------------------------------------------------------------------------- how to run it
def _run_all_reduce(c: Running) -> None:
    c.results_start_as_inputs()
    for t in c.outs:
        dist.all_reduce(t, op=c.op, group=c.pg)


def _run_broadcast(c: Running) -> None:
    c.results_start_as_inputs()
    for t in c.outs:
        dist.broadcast(t, src=c.members[c.root], group=c.pg)


def _run_reduce(c: Running) -> None:
    c.results_start_as_inputs()
    for t in c.outs:
        dist.reduce(t, dst=c.members[c.root], op=c.op, group=c.pg)


def _run_all_gather(c: Running) -> None:
    for o, i in c.pairs():
        dist.all_gather(o, i, group=c.pg)


def _run_cat(c: Running) -> None:
    for o, i in c.pairs():
        dist.all_gather_into_tensor(o, i, group=c.pg)


def _run_reduce_scatter(c: Running) -> None:
    for o, i in c.pairs():
        dist.reduce_scatter(o, i, op=c.op, group=c.pg)


def _run_reduce_scatter_cat(c: Running) -> None:
    for o, i in c.pairs():
        dist.reduce_scatter_tensor(o, i, op=c.op, group=c.pg)


def _run_all_to_all_single(c: Running) -> None:
    out_s, in_s = c.call.scalar("output_split_sizes") or None, c.call.scalar("input_split_sizes") or None
    dist.all_to_all_single(c.outs[0], c.ins[0], out_s, in_s, group=c.pg)


def _run_all_to_all(c: Running) -> None:
    dist.all_to_all(c.outs, c.ins, group=c.pg)


def _run_gather(c: Running) -> None:
    mine = c.members.index(dist.get_rank()) == c.root
    dist.gather(c.ins[0], c.outs[0] if mine else None, dst=c.members[c.root], group=c.pg)


def _run_scatter(c: Running) -> None:
    mine = c.members.index(dist.get_rank()) == c.root
    dist.scatter(c.outs[0], c.ins[0] if mine else None, src=c.members[c.root], group=c.pg)


def _run_barrier(c: Running) -> None:
    dist.barrier(group=c.pg)


def _run_send(c: Running) -> None:
    for t in c.ins:
        dist.send(t, dst=c.members[c.root], group=c.pg, tag=c.tag())


def _run_recv(c: Running) -> None:
    for t in c.outs:
        dist.recv(t, src=c.members[c.root], group=c.pg, tag=c.tag())


# -------------------------------------------------------------------------------- what it must produce
def _all_reduce(r: Recorded) -> Expected:
    out: Expected = {}
    for k in range(r.n):
        value = r.reduced([r.tensor(j, (k,)) for j in range(r.w)])
        out.update({(i, (k,)): value for i in range(r.w)})
    return out


def _reduce(r: Recorded) -> Expected:
    root = r.root()
    return {(root, (k,)): r.reduced([r.tensor(j, (k,)) for j in range(r.w)]) for k in range(r.n)}


def _all_gather(r: Recorded) -> Expected:
    w = r.w
    return {(i, (k, j)): (r.tensor(j, (k,)), None) for k in range(r.n) for i in range(w) for j in range(w)}


def _cat(r: Recorded) -> Expected:
    out: Expected = {}
    for k in range(r.n):
        gathered = torch.cat([r.tensor(j, (k,)) for j in range(r.w)])
        out.update({(i, (k,)): (gathered, None) for i in range(r.w)})
    return out


def _reduce_scatter(r: Recorded) -> Expected:
    w = r.w
    return {(i, (k,)): r.reduced([r.tensor(j, (k, i)) for j in range(w)]) for k in range(r.n) for i in range(w)}


def _reduce_scatter_cat(r: Recorded) -> Expected:
    out: Expected = {}
    for k in range(r.n):
        chunks = [r.tensor(j, (k,)).chunk(r.w) for j in range(r.w)]
        out.update({(i, (k,)): r.reduced([chunks[j][i] for j in range(r.w)]) for i in range(r.w)})
    return out


def _broadcast(r: Recorded) -> Expected:
    root = r.root()
    return {(i, (k,)): (r.tensor(root, (k,)), None) for k in range(r.n) for i in range(r.w)}


def _all_to_all(r: Recorded) -> Expected:
    return {(i, (j,)): (r.tensor(j, (i,)), None) for i in range(r.w) for j in range(r.w)}


def _all_to_all_single(r: Recorded) -> Expected:
    w = r.w
    parts = [_split(r.tensor(j, (0,)), r.calls[j].scalar("input_split_sizes"), w) for j in range(w)]
    return {(i, (0,)): (torch.cat([p[i] for p in parts]), None) for i in range(w)}


def _split(t: torch.Tensor, sizes: object, w: int) -> list[torch.Tensor]:
    if isinstance(sizes, list) and sizes:
        return list(torch.split(t, [int(s) for s in sizes]))
    return list(t.chunk(w))


def _gather(r: Recorded) -> Expected:
    root = r.root()
    return {(root, (0, j)): (r.tensor(j, (0,)), None) for j in range(r.w)}


def _scatter(r: Recorded) -> Expected:
    root = r.root()
    return {(i, (0,)): (r.tensor(root, (0, i)), None) for i in range(r.w)}


RULES: dict[Kind, Rule] = {
    "all_reduce": Rule(_run_all_reduce, _all_reduce),
    "reduce": Rule(_run_reduce, _reduce),
    "all_gather": Rule(_run_all_gather, _all_gather),
    "cat": Rule(_run_cat, _cat),
    "reduce_scatter": Rule(_run_reduce_scatter, _reduce_scatter),
    "reduce_scatter_cat": Rule(_run_reduce_scatter_cat, _reduce_scatter_cat),
    "broadcast": Rule(_run_broadcast, _broadcast),
    "all_to_all": Rule(_run_all_to_all, _all_to_all),
    "all_to_all_single": Rule(_run_all_to_all_single, _all_to_all_single),
    "gather": Rule(_run_gather, _gather),
    "scatter": Rule(_run_scatter, _scatter),
    "barrier": Rule(_run_barrier, None, "a barrier has no outputs"),
    "send": Rule(_run_send, None, "a send is matched with its receive (`numerics.check_p2p`)"),
    "recv": Rule(_run_recv, None, "a receive is matched with its send (`numerics.check_p2p`)"),
    "wait": Rule(None, None, "waiting returns its input; it is no collective of the group's sequence"),
}
"""Collective kind -> how a replay runs it and what it must produce."""
