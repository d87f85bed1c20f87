"""The dispatch mode behind `opwire.record`: one `CallRecord` per dispatcher call it is asked to record.

Each call's arguments and results are named by `tensor_names.TensorNames` (`t<N>` per tensor object, `t<N>.<k>`
per later value); before and after the call the mode works out what it reads and leaves defined (memory
allocated uninitialised, written where no mode saw, moved by `resize_`), so the record says which of its
values a replay can rebuild.
"""

from __future__ import annotations

import fnmatch
import sys
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from opwire.errors import EncodeError, OpwireWarning
from opwire.recording.aliases import AliasGroups
from opwire.recording.arguments import bind_arguments, named_inputs, to_argument
from opwire.recording.collective_capture import CollectiveRecorder, record_call
from opwire.recording.collectives import is_distributed_op
from opwire.recording.compare import GENERATOR_KEY
from opwire.recording.coverage_writes import Spans, indexed_spans, indexed_write
from opwire.recording.definedness import (
    EXTERNAL,
    UNDEFINED,
    Definedness,
    flat_tensors,
    names_metadata,
    overwrites,
    uninitialised,
)
from opwire.recording.locate import Locator
from opwire.recording.mutations import MUTATED, mutated_metadata
from opwire.recording.progress import Progress
from opwire.recording.sinks import Sink
from opwire.recording.storages import Addresses
from opwire.recording.storages import storage_key as _storage_key
from opwire.recording.subclasses import in_fake_mode, wraps_any
from opwire.recording.subclasses import unwrap_async as _unwrap_async
from opwire.recording.tensor_names import TensorNames
from opwire.schema import models as m
from opwire.schema.ops import OpSchema, op_schema

__all__ = ["DEFAULT_EXCLUDE", "RecorderMode", "target_name"]

DEFAULT_EXCLUDE: tuple[str, ...] = ("profiler::*",)
"""Ops never recorded: profiler markers pass opaque objects and do no work."""


def target_name(func: Any) -> str:
    """ "namespace::name.overload" of an OpOverload (the default overload spelled `default`)."""
    schema = func._schema
    return f"{schema.name}.{schema.overload_name or 'default'}"


class RecorderMode(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """Records every dispatcher call it sees (filtered by include/exclude patterns) into a sink."""

    def __init__(
        self,
        include: Sequence[str] | None,
        exclude: Sequence[str],
        digest: bool,
        write_defaults: bool,
        sink: Sink,
        progress: Progress | None = None,
        locator: Locator | None = None,
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.include = list(include) if include is not None else None
        self.exclude = [*DEFAULT_EXCLUDE, *exclude]
        self.digest = digest
        self.write_defaults = write_defaults
        self.sink = sink
        self.progress = progress
        self.locator = locator
        self.calls = 0
        self._schemas: dict[Any, OpSchema] = {}
        self._wanted: dict[Any, bool] = {}
        self._warned: set[str] = set()  # ops already warned about as skipped
        self.defs = Definedness()
        self.addresses = Addresses()
        self.aliases = AliasGroups()
        self.names = TensorNames(sink, digest, self.defs, self.addresses, self.aliases)
        self._tracked = False  # the current call's results are in `defs` (set by `_track`, reset by `_defined`)
        self.collectives = CollectiveRecorder(sink.group)

    # -------------------------------------------------------------------------------- filtering
    def _records(self, func: Any) -> bool:
        hit = self._wanted.get(func)
        if hit is None:
            name = target_name(func)
            short = name.removesuffix(".default")
            inc = self.include is None or any(fnmatch.fnmatchcase(n, p) for p in self.include for n in (name, short))
            exc = any(fnmatch.fnmatchcase(n, p) for p in self.exclude for n in (name, short))
            hit = self._wanted[func] = inc and not exc
        return hit

    # ----------------------------------------------------------------------------------- naming
    def _name(self, t: torch.Tensor, produced: bool) -> str:
        """The trace name of `t`'s current value (see `TensorNames.name`)."""
        return self.names.name(t, produced, self._tracked)

    def _bump_written(self, written: list[tuple[str, Any]]) -> None:
        """The next call writes these arguments: `_bump` each strided tensor (a sparse one has no storage)."""
        for _, value in written:
            for t in _tensors_in(value):
                if t.layout == torch.strided:
                    self._bump(t)

    def _bump(self, t: torch.Tensor) -> None:
        """The next call writes to `t`'s storage: later reads of every value on it get new names."""
        self.names.bump(t)

    def _append(self, rec: m.CallRecord) -> None:
        self.finish()
        if self.locator is not None:
            where, module = self.locator.source(), self.locator.module()
            if where:
                rec.metadata["source"] = where
            if module:
                rec.metadata["module"] = module
        self.sink.record(rec)
        self.calls += 1
        if self.progress is not None:
            self.progress.update()

    def finish(self) -> None:
        """Hand the objects freed since the last record to the sink."""
        dead = self.names.take_freed()
        if dead:
            self.sink.freed(dead)

    # --------------------------------------------------------------------------------- dispatch
    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        """False: keeps torch from wrapping `__torch_dispatch__` in `torch._disable_dynamo`, whose first call
        imports torch._dynamo (2 s at the start of every recording); `__torch_dispatch__` keeps Dynamo out itself."""
        return False

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if types and wraps_any(types):
            return NotImplemented  # the subclass runs its ops on the plain tensors it holds: those are recorded
        if in_fake_mode(types):
            return func(*args, **(kwargs or {}))  # fake tensors (DTensor's sharding rules): no values to record
        # What torch's wrapper does, once Dynamo is loaded: nothing can be compiling before it is
        if "torch._dynamo" in sys.modules and (without := _without_dynamo()) is not None:
            return without(self, func, types, args, kwargs)
        return self._dispatch(func, types, args, kwargs)

    def _dispatch(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if not self._records(func):
            if func._schema.is_mutable:
                self.sink.before_write(None)  # an unrecorded write: pending values must be out first
            return func(*args, **kwargs)
        schema = self._schemas.get(func)
        if schema is None:
            schema = self._schemas[func] = op_schema(func)
            self.sink.op_schema(target_name(func), schema.schema)
        target = target_name(func)
        if is_distributed_op(target):  # process groups as references, results awaited
            return record_call(self, func, schema, args, kwargs, target)
        written: list[tuple[str, Any]] = []
        try:
            bound = bind_arguments(schema, args, kwargs)
            generators = [k for k, v in bound.items() if isinstance(v, torch.Generator)]
            written = [(a.name, bound[a.name]) for a in schema.arguments if a.is_write and a.name in bound]
            reads = self._reads(target, bound, {n for n, _ in written if overwrites(target, n)})
            # A generator's state is not part of the trace: the call is recorded as drawing from the default
            # generator and marked, so replay and diff compare its outputs' metadata, not values.
            inputs = self._inputs(schema, {**bound, **dict.fromkeys(generators)}, target)
        except EncodeError as exc:  # a skipped call's writes happen outside the trace: what reads them next is
            self._bump_written(written)  # a new value, kept whole (a sparse update of a dense weight, SparseAdam's)
            return self._skip(target, str(exc), func(*args, **kwargs))
        self._bump_written(written)
        out = func(*args, **kwargs)
        self._moved_by(reads)
        self._track(target, reads, out, written)
        try:
            outputs = self._outputs(schema, out, target)
        except EncodeError as exc:
            return self._skip(target, str(exc), out)
        metadata: dict[str, str] = {GENERATOR_KEY: ",".join(generators)} if generators else {}
        mutated = {n: [self._name(t, True) for t in _tensors_in(v)] for n, v in written}
        if mutated:
            metadata[MUTATED] = mutated_metadata(mutated)
        self._defined(target, reads, out, written, outputs, metadata)
        self._append(m.CallRecord(target=target, inputs=inputs, outputs=outputs, metadata=metadata))
        self._settle(target, reads, out)
        return out

    def _moved_by(self, reads: _Reads) -> None:
        """Right after a call: its arguments' memory is where the call left it (`resize_` and `set_` move it)."""
        for t in reads.tensors:
            self.addresses.seen(_storage_key(t), t)

    def _settle(self, target: str, reads: _Reads, out: Any) -> None:
        """After a call is recorded: the values it named on memory the program manages itself (allocated
        uninitialised, or re-allocated outside the dispatcher) are written before the program goes on, since it
        may free that memory (FSDP2's `untyped_storage().resize_(0)`) while the trace writer still reads it."""
        results = [_unwrap_async(t) for t in flat_tensors(out)]
        if uninitialised(target):
            for t in results:
                self.addresses.manage(_storage_key(t))
        for t in (*reads.tensors, *results):
            if self.addresses.managed(_storage_key(t)):
                self.sink.before_write(t)

    def _reads(self, target: str, bound: dict[str, Any], overwritten: set[str]) -> _Reads:
        """What a call is about to read: writes no mode saw are found now (their values get new names), and
        storages given new memory where no mode saw (undefined until written, as an `empty`'s)."""
        reads = _Reads()
        self.aliases.start_call()
        partial = indexed_write(target, bound)  # written where its indices say, kept elsewhere: not read
        for name, value in bound.items():
            for t in flat_tensors(value):
                t = _unwrap_async(t)
                key = _storage_key(t)
                reads.keys.add(key)
                reads.tensors.append(t)
                if self.names.missed(t, key):
                    reads.external.append(t)  # written through an alias the replay cannot know of
                if self.addresses.moved(key, t):
                    self.defs.fresh(t, True)
                    self._bump(t)
                elif self.defs.outside_write(t):
                    self._bump(t)
                    reads.external.append(t)
                if name not in overwritten and not self.defs.defined(t):
                    reads.partial_undefined |= name == partial
                    reads.undefined |= name != partial
        if partial is not None and (reads.partial_undefined or reads.undefined):  # where it wrote matters
            reads.partial = (partial, indexed_spans(target, bound))
        return reads

    def _track(self, target: str, reads: _Reads, out: Any, written: list[tuple[str, Any]]) -> None:
        """Right after a call, before its results are named: what it left defined (fresh memory, written args)."""
        fresh_undefined = reads.undefined or uninitialised(target)
        for t in (_unwrap_async(t) for t in flat_tensors(out)):
            if _storage_key(t) not in reads.keys:
                self.defs.fresh(t, fresh_undefined)
        for name, value in written:
            for t in flat_tensors(value):
                self.defs.written(t, not reads.undefined, reads.spans(name))
        self._tracked = True

    def _defined(
        self, target: str, reads: _Reads, out: Any, written: list[tuple[str, Any]], outputs: list[m.Argument],
        metadata: dict[str, str],
    ) -> None:  # fmt: skip
        """After a call: which of its results are undefined, and which inputs came from outside (its metadata)."""
        if not self._tracked:  # a caller that named the results before `_track` (their bytes were kept)
            self._track(target, reads, out, written)
        self._tracked = False
        results = [_unwrap_async(t) for t in flat_tensors(out)]
        undefined = [self._name(t, True) for t in results if not self.defs.defined(t)]
        undefined += [self._name(t, True) for _, v in written for t in flat_tensors(v) if not self.defs.defined(t)]
        if reads.undefined:
            undefined += [f"output {k}" for k, a in enumerate(outputs) if a.type in _SCALARS]
        if undefined:
            metadata[UNDEFINED] = names_metadata(dict.fromkeys(undefined))
        if reads.external:
            metadata[EXTERNAL] = names_metadata(dict.fromkeys(self._name(t, False) for t in reads.external))

    def _skip(self, target: str, reason: str, out: Any) -> Any:
        """Keep a placeholder record (metadata "skipped") for a call no Argument member can carry.

        The user's code keeps running; an OpwireWarning (once per op) says the trace will not replay it.
        """
        self._tracked = False
        if target not in self._warned:
            self._warned.add(target)
            warnings.warn(
                f"opwire.record: {target} is kept as a skipped record and will not replay: {reason}",
                OpwireWarning,
                stacklevel=2,
            )
        self._append(m.CallRecord(target=target, inputs=[], outputs=[], metadata={"skipped": reason}))
        return out

    def _inputs(self, schema: OpSchema, bound: dict[str, Any], target: str) -> list[m.NamedArgument]:
        return named_inputs(
            schema, bound, self.write_defaults, lambda v, a: to_argument(v, a, target, lambda t: self._name(t, False))
        )

    def _outputs(self, schema: OpSchema, out: Any, target: str) -> list[m.Argument]:
        values = list(out) if len(schema.returns) > 1 else ([out] if schema.returns else [])
        return [
            to_argument(v, r, target, lambda t: self._name(t, True), role="return")
            for r, v in zip(schema.returns, values, strict=True)
        ]


@dataclass
class _Reads:
    """The tensors a call reads: their storages, those written outside the trace, whether any is undefined."""

    keys: set[int] = field(default_factory=set)
    tensors: list[torch.Tensor] = field(default_factory=list)
    external: list[torch.Tensor] = field(default_factory=list)
    undefined: bool = False
    partial_undefined: bool = False  # an indexed write's memory was undefined before it
    partial: tuple[str, Spans | None] | None = None  # an indexed write: the argument, the spans it wrote

    def spans(self, argument: str) -> Spans | None:
        """Where the call wrote `argument` (None: all of it); an indexed write whose positions are not known
        wrote nothing known from defined values, and may have made all of it undefined."""
        if self.partial is None or self.partial[0] != argument:
            return None
        return self.partial[1] if self.partial[1] is not None or self.undefined else []


_SCALARS = frozenset(("as_int", "as_float", "as_bool", "as_sym_int", "as_sym_float", "as_sym_bool"))


def _tensors_in(v: Any) -> list[torch.Tensor]:
    if isinstance(v, torch.Tensor):
        return [v]
    if isinstance(v, list | tuple):
        return [t for t in v if isinstance(t, torch.Tensor)]
    return []


_WITHOUT_DYNAMO: list[Any] = []


def _without_dynamo() -> Any:
    """`RecorderMode._dispatch` under `torch._dynamo.disable` (None while torch._dynamo is still being imported)."""
    if not _WITHOUT_DYNAMO:
        disable = getattr(sys.modules["torch._dynamo"], "disable", None)
        if disable is None:
            return None
        _WITHOUT_DYNAMO.append(disable(RecorderMode._dispatch, recursive=True))
    return _WITHOUT_DYNAMO[0]
