"""One row per collective kind: how a replay under torchrun runs it, and what it must produce on every rank.

`RULES` is keyed by `recording.collectives.Kind`, the kinds the recorder's table (`COLLECTIVES`) gives c10d ops;
`tests/recording/distributed/test_dist_collectives.py` checks that the two cover the same kinds, so a kind cannot
be recorded without a replay and a check. A row's `run` issues the call on live tensors in the replay's process
group (`execute.run_collective` prepares them); its `expect` recomputes every member's outputs from all ranks'
recorded inputs (`numerics.check_collective` compares them). Reductions are computed in float64 (integers
exactly), with the sum of the magnitudes reduced as the scale of their tolerance.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from opwire.recording.collectives import Kind
from opwire.recording.distributed.sequence import CollectiveCall, Names

__all__ = ["REDUCTIONS", "RULES", "Expected", "Load", "Recorded", "Rule", "Running", "name_at", "reduce"]

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


def reduce(op: str, xs: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The reduction of `xs` (float64 for floating inputs) and the magnitude scale for its tolerance."""
    floating = xs[0].is_floating_point() or xs[0].is_complex()
    if floating and all(x.dtype == xs[0].dtype and x.shape == xs[0].shape for x in xs):
        # the stack `torch.stack(xs).to(wide)` gives, each input converted as it is copied in (one pass, not two)
        stack = torch.empty((len(xs), *xs[0].shape), dtype=torch.complex128 if xs[0].is_complex() else torch.float64)
        for k, x in enumerate(xs):
            stack[k].copy_(x)
        ys = list(stack)
    else:
        ys = [x.to(torch.complex128 if x.is_complex() else torch.float64) if floating else x for x in xs]
        stack = torch.stack(ys)
    if op in ("SUM", "AVG"):
        total = stack.sum(0)
        scale = _magnitudes(stack).sum(0) if floating else None
        if op == "SUM":
            return total, scale
        if floating:
            assert scale is not None
            return total / len(xs), scale / len(xs)
        return total // len(xs), None
    if op == "PRODUCT":
        product = stack.prod(0)
        return product, _magnitudes(stack).prod(0) if floating else None
    if op == "MIN":
        return stack.amin(0), None
    if op == "MAX":
        return stack.amax(0), None
    out = ys[0].clone()
    for y in ys[1:]:
        out = {"BAND": torch.bitwise_and, "BOR": torch.bitwise_or, "BXOR": torch.bitwise_xor}[op](out, y)
    return out, None


def _magnitudes(stack: torch.Tensor) -> torch.Tensor:
    """`stack.abs()`, written over `stack` where torch can (real dtypes): `reduce` takes it after the signed results.

    `stack` is `reduce`'s own float64 copy, never an input. Overwriting it gives the values `abs()` gives, and the
    `sum(0)`/`prod(0)` after it reads them in the same layout and order (bit-identical results), without a second
    stack of fresh pages: that allocation cost more than the arithmetic (10x over a small-tensor run's reductions).
    """
    return stack.abs() if stack.is_complex() else stack.abs_()


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
        return reduce(self.red, xs)


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
