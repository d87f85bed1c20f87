"""Run one recorded collective for real on live tensors, in the fresh process group of a replay under torchrun.

Only `opwire replay RUN --collectives` calls this: the execution policy admits the trace's c10d ops there
alone (through its caller allowlist), and every group is one the replay created among the launched ranks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

from opwire.errors import BindError
from opwire.recording.collectives import collective_of
from opwire.recording.distributed.collective_rules import RULES, Running
from opwire.recording.distributed.sequence import CollectiveCall, Names
from opwire.schema import models as m
from opwire.serde.tensors import TORCH_DTYPES

__all__ = ["run_collective"]

Live = Callable[[str], torch.Tensor]
"""Tensor name -> the live replayed tensor (the recorded value the first time)."""


def _map(names: Names, live: Live) -> Any:
    return [_map(n, live) if isinstance(n, list) else live(n) for n in names]


def _empty(meta: m.TensorValue | None, where: str) -> torch.Tensor:
    if meta is None:
        raise BindError(f"{where}: the trace has no entry for the collective's result")
    dtype = TORCH_DTYPES[m.ScalarType(meta.dtype)]
    return torch.empty_strided(list(meta.sizes), list(meta.strides), dtype=dtype)


def run_collective(
    call: CollectiveCall,
    groups: dict[str, Any],
    ranks: dict[str, list[int]],
    live: Live,
    meta: Callable[[str], m.TensorValue | None],
) -> list[torch.Tensor]:
    """Execute `call` on the live tensors; the tensors holding its results, in the order of `call.outputs`."""
    spec = collective_of(call.target)
    run = RULES[spec.kind].run if spec is not None else None
    if spec is None or run is None:
        return [live(str(n)) for n in call.inputs]  # waiting (or unwrapping) returns its input
    where = f"call {call.index} ({call.target})"
    pg, members = groups[call.group], ranks[call.group]
    red = str(call.scalar(spec.reduce) or "SUM").upper() if spec.reduce else "SUM"
    op = getattr(dist.ReduceOp, red, None)
    if spec.reduce and op is None:
        raise BindError(f"{where}: reduction {red!r} cannot be replayed")
    root = int(call.scalar(spec.root)) if spec.root else 0
    ins: Any = _map(call.inputs, live)
    if spec.outputs == "return":
        outs: Any = [_empty(meta(str(n)), where) for n in call.outputs]
    elif spec.outputs:
        outs = _map(call.inputs if spec.outputs == spec.inputs else _written(call), live)
    else:
        outs = []
    run(Running(call, pg, members, op, root, ins, outs))
    return _flat(outs)


def _written(call: CollectiveCall) -> Names:
    """The names the written argument had before the call (its live tensors receive the results)."""
    spec = collective_of(call.target)
    assert spec is not None
    arg = call.args[spec.outputs]
    if arg.type == "as_nested_tensors":
        return [[t.name for t in row] for row in arg.value]
    if arg.type == "as_tensor":
        return [arg.value.name]
    return [t.name for t in arg.value]


def _flat(x: Any) -> list[torch.Tensor]:
    if isinstance(x, torch.Tensor):
        return [x]
    return [t for y in x for t in _flat(y)]
