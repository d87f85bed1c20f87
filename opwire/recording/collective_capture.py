"""Record one c10d call: process groups and reductions as references, results read after the work is done.

A `ProcessGroup` argument becomes `as_custom_obj` (name: torch's group name, class_fqn: its TorchScript class)
and the group's ranks and backend go to the trace header once; a `ReduceOp` becomes `as_custom_obj` named by
the reduction (`SUM`); a `Work` result is `as_custom_obj` named `work`. Nothing is pickled. A collective
writes its results asynchronously: the recorder waits for its `Work` (or `wait_tensor`s a functional
collective's result) before it reads them, so a trace holds the values the program later saw.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from opwire.errors import EncodeError
from opwire.recording.arguments import bind_arguments, named_inputs, to_argument
from opwire.recording.collectives import collective_of
from opwire.recording.definedness import flat_tensors
from opwire.recording.mutations import MUTATED, mutated_metadata
from opwire.schema import models as m
from opwire.schema.ops import OpArg, OpSchema

__all__ = ["CollectiveRecorder", "record_call", "wait"]

_PG = "__torch__.torch.classes.c10d.ProcessGroup"
_REDUCE = "__torch__.torch.classes.c10d.ReduceOp"
_WORK = "__torch__.torch.classes.c10d.Work"


class CollectiveRecorder:
    """Turns the arguments and results of c10d calls into Arguments; tells the sink each new group once."""

    def __init__(self, announce: Callable[[m.TraceProcessGroup], None]) -> None:
        self._announce = announce
        self._groups: set[str] = set()

    def group(self, name: str, pg: Any) -> None:
        """Announce group `name` (resolved from `pg`, or from its name) unless already announced."""
        if name in self._groups:
            return
        import torch.distributed as dist

        if pg is None:
            from torch.distributed import distributed_c10d

            pg = distributed_c10d._resolve_process_group(name)  # type: ignore[attr-defined,arg-type]
        self._groups.add(name)
        ranks = [int(r) for r in dist.get_process_group_ranks(pg)]
        self._announce(m.TraceProcessGroup(name=name, ranks=ranks, backend=str(pg.name())))

    def argument(self, value: Any, arg: OpArg, target: str, name_of: Callable[[torch.Tensor], str]) -> m.Argument:
        """The Argument for input `arg` of c10d op `target`."""
        if isinstance(value, torch.ScriptObject):
            return self._object(value, target, arg.name)
        spec = collective_of(target)
        if spec is not None and arg.name == spec.group and isinstance(value, str):
            self.group(value, None)
            return m.Argument(as_string=value)
        if str(arg.type) == "Tensor[][]" and isinstance(value, list | tuple):
            return _nested(value, name_of)  # a non-root rank's empty scatter list is no int list
        return to_argument(value, arg, target, name_of)

    def _object(self, obj: torch.ScriptObject, target: str, where: str) -> m.Argument:
        fqn = obj._type().qualified_name()
        if fqn == _PG:
            import torch.distributed as dist

            pg = dist.ProcessGroup.unbox(obj)
            self.group(str(pg.group_name), pg)
            return m.Argument(as_custom_obj=m.CustomObjArgument(name=str(pg.group_name), class_fqn=fqn))
        if fqn == _REDUCE:
            import torch.distributed as dist

            op = dist.ReduceOp.RedOpType(int(obj.op()))  # type: ignore[attr-defined]
            return m.Argument(as_custom_obj=m.CustomObjArgument(name=op.name, class_fqn=fqn))
        if fqn == _WORK:
            return m.Argument(as_custom_obj=m.CustomObjArgument(name="work", class_fqn=fqn))
        raise EncodeError(f"{target}({where}): a {fqn} object has no reference opwire can record", where)

    def outputs(
        self, schema: OpSchema, out: Any, target: str, name_of: Callable[[torch.Tensor], str]
    ) -> list[m.Argument]:
        """The results of a finished c10d call as Arguments (nested tensor lists included)."""
        values = list(out) if len(schema.returns) > 1 else ([out] if schema.returns else [])
        args = []
        for r, v in zip(schema.returns, values, strict=True):
            if isinstance(v, torch.ScriptObject):
                args.append(self._object(v, target, "return"))
            elif str(r.type) == "Tensor[][]":
                args.append(_nested(v, name_of))
            else:
                args.append(to_argument(v, r, target, name_of, role="return"))
        return args


def _nested(rows: Any, name_of: Callable[[torch.Tensor], str]) -> m.Argument:
    """A `Tensor[][]` value (lists of tensors, any of them empty) as `as_nested_tensors`."""
    return m.Argument(as_nested_tensors=[[m.TensorArgument(name=name_of(t)) for t in row] for row in rows])


def wait(target: str, out: Any) -> Any:
    """Block until the collective that returned `out` has finished; `out` with its Work replaced by a done one.

    Its results are then safe to read. A send's or receive's Work is replaced by a finished one, so the
    program's own `wait()` returns at once: waiting twice on a gloo send or receive blocks for a second
    message that never comes.
    """
    import torch.distributed as dist

    spec = collective_of(target)
    if isinstance(out, tuple):
        return tuple(wait(target, v) for v in out)
    if isinstance(out, torch.ScriptObject) and out._type().qualified_name() == _WORK:
        dist.distributed_c10d.Work.unbox(out).wait()
        if spec is None or not spec.p2p:
            return out  # DDP and others read the result through this Work's future: keep it
        done: torch.futures.Future[None] = torch.futures.Future()
        done.set_result(None)
        return torch._C._distributed_c10d._create_work_from_future(done).boxed()  # type: ignore[attr-defined]
    for v in out if isinstance(out, list) else (out,):
        if isinstance(v, torch.Tensor) and target.startswith("_c10d_functional::") and spec is not None:
            if spec.kind != "wait":
                torch.ops._c10d_functional.wait_tensor(v)
    return out


def record_call(mode: Any, func: Any, schema: OpSchema, args: Any, kwargs: dict[str, Any], target: str) -> Any:
    """Run and record c10d call `func` for RecorderMode `mode` (its naming, sink and bookkeeping)."""
    spec = collective_of(target)
    extra = spec.writes if spec is not None else ()
    try:
        bound = bind_arguments(schema, args, kwargs)
        written = [
            (a.name, bound[a.name]) for a in schema.arguments if (a.is_write or a.name in extra) and a.name in bound
        ]
        # what a collective writes and does not take as input (allgather's outputs, a receive's buffer)
        overwritten = {n for n, _ in written if spec is None or n != spec.inputs}
        reads = mode._reads(target, bound, overwritten)
        if spec is not None and spec.kind != "wait":
            # a collective reads what is there now: c10d's C++ side (DDP's parameter checks and buckets) writes
            # through data pointers no dispatch mode sees, so its inputs are taken afresh, never from an older name
            for value in bound.values():
                for t in flat_tensors(value):
                    mode._bump(t)
        inputs = _inputs(mode, schema, bound, target)
    except EncodeError as exc:
        return mode._skip(target, str(exc), func(*args, **kwargs))
    for _, value in written:
        for t in flat_tensors(value):
            mode._bump(t)
    out = wait(target, func(*args, **kwargs))
    mode._moved_by(reads)
    mode._track(target, reads, out, written)
    try:
        outputs = mode.collectives.outputs(schema, out, target, lambda t: mode._name(t, True))
    except EncodeError as exc:
        return mode._skip(target, str(exc), out)
    metadata: dict[str, str] = {}
    mutated = {n: [mode._name(t, True) for t in flat_tensors(v)] for n, v in written}
    if mutated:
        metadata[MUTATED] = mutated_metadata(mutated)
    mode._defined(target, reads, out, written, outputs, metadata)
    mode._append(m.CallRecord(target=target, inputs=inputs, outputs=outputs, metadata=metadata))
    mode._settle(target, reads, out)
    return out


def _inputs(mode: Any, schema: OpSchema, bound: dict[str, Any], target: str) -> list[m.NamedArgument]:
    rec: CollectiveRecorder = mode.collectives
    return named_inputs(
        schema, bound, mode.write_defaults, lambda v, a: rec.argument(v, a, target, lambda t: mode._name(t, False))
    )
