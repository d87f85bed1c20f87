"""`OpenedProgram`: a program or archive opened lazily, which owns everything derived from it.

Whatever it was opened from (a .pt2 path, JSON or Thrift bytes, a model, a torch ExportedProgram, a lazy
`opwire.serde.pt2.Pt2Archive`), the program is decoded on first use and each tensor is read when asked for
(`inspect` and `view` touch only `.program`). Its pytree specs and tensor bindings are checked once
(`check()`). Runners and other bound state built from it live here (`bound(key, build)`), so they die with
it and are rebuilt when the model it wraps had its program or tensor tables replaced.

How in-place edits are seen. Bound state keyed here is rebuilt when the wrapped model's program or tensor
tables are *replaced*. An edit *inside* a program (a node's target, an argument appended to a list) is
seen by the executor's bound graphs through `opwire.schema.edits` (a counter every model assignment and
every tracked list mutation moves, plus identity snapshots per node). That one mechanism must stay beside
this owner: models are mutable pydantic objects users edit in place, and comparing every node on every
run instead would cost what binding saves.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

from opwire.errors import DecodeError
from opwire.program.signature import program_signature
from opwire.program.specs import pytree_specs
from opwire.schema import models as m
from opwire.schema.spec_roles import bound_tensors, first_missing
from opwire.serde.tensor_tables import TABLES, ProgramTables, Table, check_table

if TYPE_CHECKING:
    import torch
    from torch import Tensor
    from torch.utils._pytree import TreeSpec

    from opwire.program.signature import Signature


__all__ = ["LazyArchive", "OpenedProgram", "opened_of"]


class LazyArchive(ProgramTables, Protocol):
    """What an archive opened lazily offers (`opwire.serde.pt2.Pt2Archive`, `opwire.serde.opw.OpwArchive`,
    `opwire.serde.thrift_archive.ThriftArchive`): the program and the tensor tables' four words."""

    def verify(self) -> None: ...
    def materialize(self) -> m.OpwireArchive: ...
    def close(self) -> None: ...


T = TypeVar("T")


class OpenedProgram:
    """A program (kind "program") or a program with its tensors (kind "archive"), opened lazily."""

    def __init__(
        self,
        kind: Literal["program", "archive"],
        source: str,
        *,
        model: m.ExportedProgram | m.OpwireArchive | None = None,
        decode: Callable[[], m.ExportedProgram | m.OpwireArchive] | None = None,
        pt2: LazyArchive | None = None,
        owns_pt2: bool = False,
    ) -> None:
        self.kind = kind
        self.source = source
        self._model = model
        self._decode = decode
        self._pt2 = pt2
        self._owns_pt2 = owns_pt2
        self._lock = threading.RLock()
        self._tables: dict[str, dict[str, m.TensorValue]] = {}
        self._checked: tuple[TreeSpec | None, TreeSpec | None] | None = None
        self._checked_token: tuple[Any, ...] = ()
        self._bound: dict[Hashable, tuple[tuple[Any, ...], Any]] = {}

    # ------------------------------------------------------------------------------- the program
    def _resolved(self) -> m.ExportedProgram | m.OpwireArchive | None:
        """The model behind this program (decoded on first use); None for a lazy .pt2."""
        if self._model is None and self._decode is not None:
            with self._lock:
                if self._model is None:
                    self._model = self._decode()
                    self._decode = None
        return self._model

    @property
    def program(self) -> m.ExportedProgram:
        """The exported program (decoded on first use; for a .pt2 only its JSON entry is read)."""
        model = self._resolved()
        if model is None:
            assert self._pt2 is not None
            return self._pt2.program
        return model.program if isinstance(model, m.OpwireArchive) else model

    @property
    def pt2(self) -> LazyArchive | None:
        """The lazy archive this reads from (a .pt2's `Pt2Archive`; None when opened from anything else)."""
        return self._pt2

    @property
    def model(self) -> m.ExportedProgram | m.OpwireArchive | None:
        """The model this was opened from or decoded into (None for a lazy .pt2 archive)."""
        return self._resolved()

    def signature(self) -> Signature:
        """What the program takes and returns (`opwire.program.signature.program_signature`)."""

        return program_signature(self.program)

    # ---------------------------------------------------------------------------------- tensors
    def names(self, table: Table) -> list[str]:
        """Names of the weights or constants this holds, without reading any of them."""
        table = check_table(table)
        model = self._resolved()
        if isinstance(model, m.OpwireArchive):
            return list(getattr(model, table))
        if self._pt2 is not None:
            # a legacy .pt2 keeps its tensors in one pickle with no index: the names the program binds
            return self._pt2.names(table) or list(bound_tensors(self.program)[TABLES.index(table)])
        return []

    def value(self, table: Table, name: str) -> m.TensorValue:
        """Weight or constant `name` as a TensorValue (read from the file now, unless its table was read)."""
        table = check_table(table)
        if self._resolved() is None and self._pt2 is not None and table not in self._tables:
            if name in self._pt2.names(table):
                return self._pt2.value(table, name)
        tv = self._values(table).get(name)
        if tv is None:
            raise DecodeError(f"{self.source} holds no {table[:-1]} named {name!r}", f"{table}[{name!r}]")
        return tv

    def tensor(self, table: Table, name: str, device: str | torch.device | None = None) -> Tensor:
        """Weight or constant `name` as a tensor on `device`, gradients off (mapped from a lazy archive's file)."""
        from opwire.serde import tensors  # deferred: imports torch

        table = check_table(table)
        if self._resolved() is None and self._pt2 is not None and name in self._pt2.names(table):
            out = self._pt2.tensor(table, name, device)
        else:
            out = tensors.shared_tensor(self.value(table, name), device, f"{table}[{name!r}]")
        return out.requires_grad_(False)

    def _values(self, table: Table) -> dict[str, m.TensorValue]:
        """The weights or constants as TensorValues (each read from the file once, when first asked for)."""
        model = self._resolved()
        if isinstance(model, m.OpwireArchive):
            return dict(getattr(model, table))
        if self._pt2 is None:
            return {}
        with self._lock:
            if table not in self._tables:
                self._tables.update(self._read_pt2_tables())
            return dict(self._tables[table])

    def _read_pt2_tables(self) -> dict[str, dict[str, m.TensorValue]]:
        pt2 = self._pt2
        assert pt2 is not None
        need_w, need_c = bound_tensors(pt2.program)
        listed = {*pt2.names("weights"), *pt2.names("constants")}
        if any(n not in listed for n in [*need_w, *need_c]):  # pickled tables (legacy layouts): pt2 reads them
            whole = pt2.materialize()
            return {"weights": dict(whole.weights), "constants": dict(whole.constants)}
        return {t: {n: pt2.value(t, n) for n in pt2.names(t)} for t in TABLES}

    def tensors(self, device: str | torch.device | None = None) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
        """(parameters and persistent buffers, constants) as tensors on `device`, gradients off.

        Nothing is copied that need not be: a lazy archive maps its tensors from the file (copy-on-write), an
        OpwireArchive's tensors view their payload bytes. Runners copy what the signature says a run mutates,
        so neither the file nor the caller's model is ever written."""
        from opwire.serde import tensors  # deferred: imports torch

        self.check()
        model = self._resolved()
        if model is None and self._pt2 is not None:
            state, consts = self._pt2.tensors(device)
        else:
            tables = {t: self._values(t) for t in TABLES}
            state, consts = (
                {k: tensors.shared_tensor(v, device, f"{t}[{k!r}]") for k, v in tables[t].items()} for t in TABLES
            )
        for t in [*state.values(), *consts.values()]:
            t.requires_grad_(False)
        return state, consts

    def archive(self) -> m.OpwireArchive:
        """Everything as one OpwireArchive model (reads every tensor; a bare program gets empty tables)."""
        model = self._resolved()
        if isinstance(model, m.OpwireArchive):
            return model
        if self._pt2 is not None:
            return self._pt2.materialize()
        assert model is not None
        return m.OpwireArchive(program=model, weights={}, constants={}, opwire_version="")

    # ----------------------------------------------------------------------------------- checks
    def check(self) -> tuple[TreeSpec | None, TreeSpec | None]:
        """Check once that the pytree specs parse and every bound tensor exists; returns (in_spec, out_spec)."""
        checked = self._checked
        if checked is not None and self._model_token_is_current():
            return checked
        with self._lock:
            program = self.program
            missing = first_missing(program, set(self.names("weights")), set(self.names("constants")))
            if missing is not None:
                raise DecodeError(
                    f"the program binds {missing} but {self.source} holds no tensor for it; pass an archive with "
                    "its weights (a .pt2 from torch.export.save, opwire.serde.pt2.open/read, or an OpwireArchive)",
                    "graph_module.signature.input_specs",
                )
            self._checked = pytree_specs(program.graph_module)
            self._checked_token = self._token()
            return self._checked

    def _model_token_is_current(self) -> bool:
        return self._model is None or _same(self._checked_token, self._token())

    # ------------------------------------------------------------------------------ bound state
    def _token(self) -> tuple[Any, ...]:
        """Identity of what bound state is derived from: the program and every tensor payload of a model."""
        model = self._model
        if model is None:
            return ()
        if isinstance(model, m.ExportedProgram):
            return (model,)
        out: list[Any] = [model.program, model.weights, model.constants]
        for table in (model.weights, model.constants):
            for k, tv in table.items():
                out += (k, tv, *tv.__dict__.values())
        return tuple(out)

    def bound(self, key: Hashable, build: Callable[[], T]) -> T:
        """The state bound under `key` (a runner per device and policy), built once and kept while valid.

        Built again when the wrapped model's program, tensor tables or payloads were replaced since."""
        token = self._token()
        with self._lock:
            hit = self._bound.get(key)
            if hit is not None and _same(hit[0], token):
                return hit[1]  # type: ignore[no-any-return]
        value = build()  # outside the lock: building may run user-visible work (decode, checks)
        with self._lock:
            self._bound[key] = (token, value)
        return value

    # --------------------------------------------------------------------------------- lifetime
    def close(self) -> None:
        """Close the file a lazy archive keeps open (tensors already read stay usable)."""
        if self._pt2 is not None and self._owns_pt2:
            self._pt2.close()

    def __enter__(self) -> OpenedProgram:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        decoded = self._model is not None or (self._pt2 is not None and "program" in vars(self._pt2))
        state = "decoded" if decoded else "lazy"
        return f"<opwire.OpenedProgram {self.kind} from {self.source} ({state})>"


def _same(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


# A model passed directly (run_program(archive) in a loop) keeps its opened program in its instance dict
# under this key, so repeated runs reuse the bound state: pydantic ignores instance-dict entries that are
# not fields (in ==, model_dump and opwire's codecs), and the opened program dies with the model. (A table
# keyed by id() could hand a dead model's state to a new one; pydantic models are unhashable.)
_SLOT = "_opwire_opened"


class _Slot:
    """Holder of a model's opened program; copies of the model start empty."""

    def __init__(self, opened: OpenedProgram | None = None) -> None:
        self.opened = opened

    def __deepcopy__(self, memo: Any) -> _Slot:
        return _Slot()

    def __copy__(self) -> _Slot:
        return _Slot()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Slot)

    __hash__ = None  # type: ignore[assignment]


def opened_of(model: m.ExportedProgram | m.OpwireArchive) -> OpenedProgram:
    """The opened program of a model, made on first use and kept with the model."""
    slot = model.__dict__.get(_SLOT)
    if isinstance(slot, _Slot) and slot.opened is not None and slot.opened._model is model:
        return slot.opened
    kind: Literal["program", "archive"] = "archive" if isinstance(model, m.OpwireArchive) else "program"
    opened = OpenedProgram(kind, f"the {type(model).__name__} model", model=model)
    object.__setattr__(model, _SLOT, _Slot(opened))
    return opened
