"""Local or inherited: does a call that differs between two runs disagree itself, or only receive other inputs?

Both runs' inputs are in the traces, so the question is answered by running the call again: B's call on A's
recorded inputs is compared with A's outputs, and A's call on B's inputs with B's outputs. When both agree, the
call computes the same thing in both runs and its difference came with its inputs: **inherited**. When either
disagrees, the op, its kernel or its arguments changed: **local**. A call only one run made, or whose
arguments differ, is local by definition. A collective cannot run alone: its difference is inherited when its
inputs differ on this rank, and from another rank when they agree here (`opwire diff RUN_A RUN_B` names it).

Running a call executes a file's content: through the op policy in-process (the API's default), or inside
the process sandbox with `isolate=True` (what `opwire diff` does).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch

from opwire.errors import OpwireError
from opwire.proxy_executor.default_policy import DefaultPolicy
from opwire.proxy_executor.exec_policy import ExecPolicy
from opwire.proxy_executor.executor import ProxyExecutor
from opwire.proxy_executor.guard import RunGuard
from opwire.proxy_executor.isolate import Child, run_in_child
from opwire.proxy_executor.isolate_program import api_limits
from opwire.recording.collectives import collective_of
from opwire.recording.compare import compare_tensor
from opwire.recording.replay_engine import Replayer, ReplayOptions
from opwire.recording.source import TraceSource
from opwire.schema import models as m
from opwire.schema.refs import tensor_names

__all__ = [
    "ANOTHER_RANK", "INHERITED", "LOCAL", "MAX_CHECKED", "Verdict", "any_undefined", "flat_names", "origins",
    "values_differ",
]  # fmt: skip

LOCAL = "local"
INHERITED = "inherited"
ANOTHER_RANK = "inherited from another rank"
MAX_CHECKED = 256
"""Differing calls run again per diff (the earliest); later ones are left unlabelled."""


@dataclass(frozen=True)
class Verdict:
    """The origin of one aligned pair's difference: `LOCAL`, `INHERITED`, `ANOTHER_RANK`, or "" with `why`."""

    origin: str
    why: str = ""


def origins(
    src_a: TraceSource,
    src_b: TraceSource,
    pairs: Iterable[tuple[int, int, m.CallRecord, m.CallRecord]],
    rtol: float | None = None,
    atol: float | None = None,
    allow_ops: Iterable[str] = (),
    isolate: bool = False,
) -> dict[tuple[int, int], Verdict]:
    """The verdict of each aligned pair (A index, B index, A's record, B's record) whose outputs differ."""
    todo = list(pairs)[:MAX_CHECKED]
    if not todo:
        return {}
    policy = ExecPolicy(allow_ops)
    if not isolate:
        return _judge_all(src_a, src_b, todo, rtol, atol, policy)

    def work(child: Child) -> dict[str, bytes]:
        child.ready()
        found = _judge_all(src_a, src_b, todo, rtol, atol, policy)
        return {"verdicts": json.dumps([[i, j, v.origin, v.why] for (i, j), v in found.items()]).encode()}

    # the child keeps the traces' open files: every other descriptor is closed as it enters the sandbox
    keep = [*src_a.descriptors(), *src_b.descriptors()]
    blobs = run_in_child(work, api_limits(None, None), keep=keep).result()
    return _read_verdicts(blobs.get("verdicts", b""))


def _read_verdicts(raw: bytes) -> dict[tuple[int, int], Verdict]:
    """The child's verdicts, checked entry by entry (the child is not trusted)."""
    try:
        rows = json.loads(raw)
    except (ValueError, RecursionError):
        rows = None
    ok = (LOCAL, INHERITED, ANOTHER_RANK, "")
    if not isinstance(rows, list) or not all(
        isinstance(r, list) and len(r) == 4 and type(r[0]) is int and type(r[1]) is int and r[2] in ok
        and isinstance(r[3], str)
        for r in rows
    ):  # fmt: skip
        raise OpwireError("the sandboxed diff sent back malformed verdicts")
    return {(r[0], r[1]): Verdict(r[2], r[3]) for r in rows}


def _judge_all(
    src_a: TraceSource,
    src_b: TraceSource,
    todo: list[tuple[int, int, m.CallRecord, m.CallRecord]],
    rtol: float | None,
    atol: float | None,
    policy: ExecPolicy,
) -> dict[tuple[int, int], Verdict]:
    run_a = _runner(src_a, rtol, atol, policy)
    run_b = _runner(src_b, rtol, atol, policy)
    out: dict[tuple[int, int], Verdict] = {}
    with RunGuard("diff") as guard, torch.no_grad():
        for i, j, ra, rb in todo:
            where = f"calls {i} and {j} ({ra.target})"
            out[(i, j)] = guard.call(where, _judge, src_a, src_b, run_a, run_b, i, j, ra, rb, rtol, atol)
    return out


def _runner(src: TraceSource, rtol: float | None, atol: float | None, policy: ExecPolicy) -> Replayer:
    opts = ReplayOptions(DefaultPolicy.FROM_SCHEMA, "isolated", rtol, atol, None, policy)
    return Replayer(src, ProxyExecutor(policy=DefaultPolicy.FROM_SCHEMA, exec_policy=policy), opts)


def _judge(
    src_a: TraceSource, src_b: TraceSource, run_a: Replayer, run_b: Replayer, i: int, j: int,
    ra: m.CallRecord, rb: m.CallRecord, rtol: float | None, atol: float | None,
) -> Verdict:  # fmt: skip
    if collective_of(ra.target) is not None:
        same = _same_inputs(src_a, src_b, ra, rb, rtol, atol)
        if same is None:
            return Verdict("", "its inputs could not be compared")
        return Verdict(ANOTHER_RANK if same else INHERITED)
    on_a, on_b = _hybrid(rb, ra), _hybrid(ra, rb)
    if on_a is None or on_b is None:
        return Verdict("", "the two calls pass different tensor arguments")
    found = []
    try:
        found = run_a.run(i, on_a) + run_b.run(j, on_b)
    except OpwireError as exc:
        return Verdict("", f"running it again failed: {exc}")
    errors = [f for f in found if f.kind == "error"]
    if errors:
        return Verdict("", f"running it again failed: {errors[0].detail}")
    return Verdict(LOCAL if found else INHERITED)


def _hybrid(call: m.CallRecord, inputs_from: m.CallRecord) -> m.CallRecord | None:
    """`call`'s op and non-tensor arguments on `inputs_from`'s tensors, expecting `inputs_from`'s outputs."""
    theirs = {na.name: na for na in inputs_from.inputs}
    inputs = []
    for na in call.inputs:
        mine = tensor_names(na.arg)
        if not mine:
            inputs.append(na)
            continue
        other = theirs.get(na.name)
        if other is None or len(tensor_names(other.arg)) != len(mine):
            return None
        inputs.append(other)
    return m.CallRecord(target=call.target, inputs=inputs, outputs=inputs_from.outputs, metadata=inputs_from.metadata)


def _same_inputs(
    src_a: TraceSource, src_b: TraceSource, ra: m.CallRecord, rb: m.CallRecord, rtol: float | None, atol: float | None
) -> bool | None:
    """Whether a collective's tensor inputs on this rank hold the same values in both runs (None: unreadable)."""
    spec = collective_of(ra.target)
    args_b = {na.name: tensor_names(na.arg) for na in rb.inputs}
    names_a = [n for na in ra.inputs if spec is None or na.name == spec.inputs for n in tensor_names(na.arg)]
    names_b = [n for na in rb.inputs if spec is None or na.name == spec.inputs for n in args_b.get(na.name, [])]
    try:
        return not values_differ(src_a, src_b, names_a, names_b, rtol, atol)
    except OpwireError:
        return None


def values_differ(
    src_a: TraceSource, src_b: TraceSource, names_a: list[Any], names_b: list[Any], rtol: float | None,
    atol: float | None,
) -> bool:  # fmt: skip
    """Whether recorded tensors (names, nested lists of names) differ between two traces: in number, layout or
    value. An unreadable payload is an OpwireError."""
    flat_a, flat_b = flat_names(names_a), flat_names(names_b)
    if len(flat_a) != len(flat_b):
        return True
    for nx, ny in zip(flat_a, flat_b, strict=True):
        want = src_a.meta(nx)
        if want is None or src_b.meta(ny) is None:
            return True
        if src_a.undefined(nx) or src_b.undefined(ny):  # no bytes kept: nothing to compare but the layout
            theirs = src_b.meta(ny)
            if theirs is None or (want.dtype, list(want.sizes)) != (theirs.dtype, list(theirs.sizes)):
                return True
            continue
        if compare_tensor(src_b.load(ny, "cpu"), want, rtol, atol, True, partial(src_a.load, nx, "cpu")) is not None:
            return True
    return False


def flat_names(names: Any) -> list[str]:
    """The tensor names of a recorded argument list (names, nested lists of names), in order."""
    return [n for x in names for n in (flat_names(x) if isinstance(x, list) else [str(x)])]


def any_undefined(src: TraceSource, names: Any) -> bool:
    """Whether some of these recorded tensors hold no defined byte in `src` (a marker: they may differ unseen)."""
    return any(src.undefined(n) for n in flat_names(names))
