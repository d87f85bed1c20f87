"""The collectives opwire records, replays and checks across ranks: one row per op, what each argument is.

c10d's schemas carry no alias annotations (`allreduce_` writes its `tensors` without `(a!)`), so which
arguments a collective writes, which hold its inputs and which name the group is kept here;
`tests/recording/distributed/test_dist_collectives.py` checks every row against the schemas the installed torch
registers and that every c10d op torch registers is either a row or listed in `NOT_CHECKED`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["COLLECTIVES", "NOT_CHECKED", "Collective", "Kind", "collective_of", "is_distributed_op"]


Kind = Literal[
    "all_reduce", "reduce", "all_gather", "cat", "reduce_scatter", "reduce_scatter_cat", "broadcast", "all_to_all",
    "all_to_all_single", "gather", "scatter", "barrier", "send", "recv", "wait",
]  # fmt: skip
"""What a collective does with its tensors: `cat` gathers into one tensor, `reduce_scatter_cat` scatters from
one, `wait` only waits. How a replay runs each kind and what it must produce on every rank is its row of
`recording.distributed.collective_rules.RULES`."""


@dataclass(frozen=True)
class Collective:
    """What one collective op does with its arguments."""

    kind: Kind
    inputs: str = ""  # argument holding the inputs ("" for none)
    outputs: str = ""  # argument written with the results, or "return"
    reduce: str = ""  # argument naming the reduction
    root: str = ""  # argument naming the root (group rank) or the peer of a send/receive
    writes: tuple[str, ...] = ()  # arguments written in place that the schema does not annotate
    group: str = "process_group"  # argument naming the group (a ProcessGroup object or a group name)

    @property
    def p2p(self) -> bool:
        """A point-to-point call (not in a group's collective sequence)."""
        return self.kind in ("send", "recv")


def _c10d(kind: Kind, inputs: str, outputs: str = "", reduce: str = "", root: str = "") -> Collective:
    writes = (outputs,) if outputs and outputs != "return" else ()
    return Collective(kind, inputs, outputs, reduce, root, writes)


def _fn(kind: Kind, inputs: str, outputs: str = "return", reduce: str = "", root: str = "") -> Collective:
    return Collective(kind, inputs, outputs, reduce, root, group="group_name")


COLLECTIVES: dict[str, Collective] = {
    "c10d::allreduce_": _c10d("all_reduce", "tensors", "tensors", reduce="reduce_op"),
    "c10d::allreduce_coalesced_": _c10d("all_reduce", "tensors", "tensors", reduce="reduce_op"),
    "c10d::allgather_": _c10d("all_gather", "input_tensors", "output_tensors"),
    "c10d::_allgather_base_": _c10d("cat", "input_tensor", "output_tensor"),
    "c10d::allgather_into_tensor_coalesced_": _c10d("cat", "inputs", "outputs"),
    "c10d::reduce_scatter_": _c10d("reduce_scatter", "input_tensors", "output_tensors", reduce="reduce_op"),
    "c10d::_reduce_scatter_base_": _c10d("reduce_scatter_cat", "input_tensor", "output_tensor", reduce="reduce_op"),
    "c10d::reduce_scatter_tensor_coalesced_": _c10d("reduce_scatter_cat", "inputs", "outputs", reduce="reduce_op"),
    "c10d::broadcast_": _c10d("broadcast", "tensors", "tensors", root="root_rank"),
    "c10d::reduce_": _c10d("reduce", "tensors", "tensors", reduce="reduce_op", root="root_rank"),
    "c10d::alltoall_base_": _c10d("all_to_all_single", "input", "output"),
    "c10d::alltoall_": _c10d("all_to_all", "input_tensors", "output_tensors"),
    "c10d::gather_": _c10d("gather", "input_tensors", "output_tensors", root="root_rank"),
    "c10d::scatter_": _c10d("scatter", "input_tensors", "output_tensors", root="root_rank"),
    "c10d::barrier": _c10d("barrier", ""),
    "c10d::monitored_barrier_": _c10d("barrier", ""),
    "c10d::send": _c10d("send", "tensors", root="dst"),
    "c10d::recv_": _c10d("recv", "", "tensors", root="src"),
    "_c10d_functional::all_reduce": _fn("all_reduce", "input", reduce="reduce_op"),
    "_c10d_functional::all_reduce_": _fn("all_reduce", "input", "input", reduce="reduce_op"),
    "_c10d_functional::all_reduce_coalesced": _fn("all_reduce", "inputs", reduce="reduce_op"),
    "_c10d_functional::all_reduce_coalesced_": _fn("all_reduce", "inputs", "inputs", reduce="reduce_op"),
    "_c10d_functional::all_gather_into_tensor": _fn("cat", "input"),
    "_c10d_functional::all_gather_into_tensor_out": _fn("cat", "input", "out"),
    "_c10d_functional::all_gather_into_tensor_coalesced": _fn("cat", "inputs"),
    "_c10d_functional::reduce_scatter_tensor": _fn("reduce_scatter_cat", "input", reduce="reduce_op"),
    "_c10d_functional::reduce_scatter_tensor_out": _fn("reduce_scatter_cat", "input", "out", reduce="reduce_op"),
    "_c10d_functional::reduce_scatter_tensor_coalesced": _fn("reduce_scatter_cat", "inputs", reduce="reduce_op"),
    "_c10d_functional::all_to_all_single": _fn("all_to_all_single", "input"),
    "_c10d_functional::broadcast": _fn("broadcast", "input", root="src"),
    "_c10d_functional::broadcast_": _fn("broadcast", "input", "input", root="src"),
    "_c10d_functional::wait_tensor": Collective("wait", "tensor", "return", group=""),
    "_c10d_functional::_wrap_tensor_autograd": Collective("wait", "input", "return", group=""),
}
"""Op ("namespace::name", every overload) -> what it does."""

NOT_CHECKED: dict[str, str] = {
    "c10d::allgather_coalesced_": "recorded and replayed; its per-rank output lists are not checked across ranks",
    "c10d::recv_any_source_": "recorded; the sender is known only at run time, so it is not matched to a send",
    "c10d::check_for_nan": "a local check, no communication",
    "_c10d_functional::isend": "recorded; functional point-to-point is not matched across ranks",
    "_c10d_functional::irecv": "recorded; functional point-to-point is not matched across ranks",
    "_c10d_functional::batch_p2p_ops": "recorded; functional point-to-point is not matched across ranks",
}
"""c10d ops that are recorded but not part of the cross-rank checks, and why."""


def collective_of(target: str) -> Collective | None:
    """The row of `target` ("ns::name.overload" or "ns::name"), None for an op that is no collective."""
    return COLLECTIVES.get(target.rsplit(".", 1)[0] if "." in target.partition("::")[2] else target)


def is_distributed_op(target: str) -> bool:
    """Whether `target` is a c10d op (a collective, a point-to-point call, or one of NOT_CHECKED)."""
    return target.startswith(("c10d::", "_c10d_functional::"))
