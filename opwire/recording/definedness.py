"""Which recorded values have defined content, and which were written where no dispatch mode sees.

Memory from `empty*` and `new_empty*` holds whatever was there before: its bytes are *undefined*, as are views
of it, copies from it and anything computed from it, until recorded calls have written every byte of it from
defined values. The recorder tracks this per storage as the byte ranges written so far, and keeps a shadow copy
of what the recording last saw there. A recorded call that reads a range whose bytes differ from the shadow
found a write no dispatch mode saw (DDP's reducer filling a bucket through raw pointers, a C++ hook, another
thread): the value is marked as produced *outside the trace* and its range counts as written.

A record says both in its metadata, as JSON lists of tensor names (a scalar output as `output N`):
`undefined` for the values it produced whose content is undefined, `external` for the inputs it read that were
written outside the trace. Replay and diff never compare an undefined value (`compare.reproducible`); replay
takes an external input from the recording, as no replay can produce it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from opwire.errors import DecodeError, printable
from opwire.recording.coverage_writes import Spans, covered, union, view_spans
from opwire.recording.storages import data_ptr, storage_key

__all__ = [
    "EXTERNAL",
    "UNDEFINED",
    "Definedness",
    "flat_tensors",
    "metadata_names",
    "names_metadata",
    "overwrites",
    "uninitialised",
]

UNDEFINED = "undefined"
"""Metadata key: values a call produced (outputs, arguments it wrote) whose content is undefined."""
EXTERNAL = "external"
"""Metadata key: inputs a call read that were written outside the trace since the recording last saw them."""

_OVERWRITING = frozenset(
    ("copy_", "fill_", "zero_", "uniform_", "normal_", "bernoulli_", "random_", "exponential_", "cauchy_",
     "log_normal_", "geometric_", "set_")
)  # fmt: skip
"""In-place ops whose result does not depend on what their `self` held."""
MAX_SHADOW_BYTES = 256 << 20
"""Bytes of shadow copies (of storages not yet wholly defined) the recorder keeps at most."""


def uninitialised(target: str) -> bool:
    """Whether op `target` ("ns::name.overload") returns fresh memory it does not write (`empty`, `new_empty`...)."""
    name = target.partition("::")[2].split(".")[0].lstrip("_")
    return name.startswith(("empty", "new_empty"))


def overwrites(target: str, argument: str) -> bool:
    """Whether a call of `target` writes `argument` without reading what it held (`out=`, `copy_`'s self)."""
    if argument.startswith("out") or argument in ("output_tensors", "output_tensor", "output_lists"):
        return True
    return argument == "self" and target.partition("::")[2].split(".")[0] in _OVERWRITING


def flat_tensors(v: Any) -> list[torch.Tensor]:
    """Tensors in an argument value, nested lists and tuples included (`Tensor[][]`)."""
    if isinstance(v, torch.Tensor):
        return [v]
    if isinstance(v, list | tuple):
        return [t for x in v for t in flat_tensors(x)]
    return []


def names_metadata(names: Iterable[str]) -> str:
    """The metadata value listing `names`."""
    return json.dumps(list(names), separators=(",", ":"))


def metadata_names(metadata: Mapping[str, str], key: str, where: str) -> frozenset[str]:
    """The names listed under `key` (empty when absent); a DecodeError naming `where` when it is not a list."""
    raw = metadata.get(key)
    if raw is None:
        return frozenset()
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError):
        doc = None
    if isinstance(doc, list) and all(isinstance(n, str) for n in doc):
        return frozenset(doc)
    raise DecodeError(
        f"{where}: metadata {key!r} should be a JSON list of tensor names, "
        f"got {printable(raw[:60])!r}{'...' if len(raw) > 60 else ''}"
    )


@dataclass
class _Storage:
    """A storage not (yet) wholly defined: its written byte ranges and the bytes the recording last saw."""

    nbytes: int
    shadow: torch.Tensor | None  # uint8 copy of the whole storage (None: not kept, outside writes go unseen)
    written: list[tuple[int, int]] = field(default_factory=list)  # merged, sorted [start, end)

    def covers(self, start: int, end: int) -> bool:
        return start >= end or any(s <= start and end <= e for s, e in self.written)

    def remove(self, start: int, end: int) -> None:
        out: list[tuple[int, int]] = []
        for s, e in self.written:
            out += [(a, b) for a, b in ((s, min(e, start)), (max(s, end), e)) if a < b]
        self.written = out


class Definedness:
    """Tracks, per storage, which bytes recorded calls (or detected outside writes) have defined.

    Shadow copies take at most `max_shadow_bytes`; past that the oldest are dropped (their storages stay
    undefined until written, but a write outside the dispatcher into them is no longer seen).
    """

    def __init__(self, max_shadow_bytes: int = MAX_SHADOW_BYTES) -> None:
        self._storages: dict[int, _Storage] = {}  # storage key -> state; absent: wholly defined
        self._shadow_bytes = 0
        self._max_shadow_bytes = max_shadow_bytes

    def defined(self, t: torch.Tensor) -> bool:
        """Whether every byte `t` reads is defined (a strided view's own elements, not the gaps between them)."""
        state, start, end = self._at(t)
        if state is None or state.covers(start, end):
            return True
        spans = None if _dense(t) else view_spans(t)
        return spans is not None and covered(state.written, spans)

    def blank(self, t: torch.Tensor) -> bool:
        """Whether no byte `t` reads is defined (then a trace keeps its layout and no bytes: it loads as zeros)."""
        if not self._storages:  # nothing undefined is tracked (most of a recording): no storage lookup
            return False
        state, start, end = self._at(t)
        return state is not None and start < end and not any(s < end and start < e for s, e in state.written)

    def outside_write(self, t: torch.Tensor) -> bool:
        """Whether `t`'s undefined bytes changed since the recording last saw them (then they count as written)."""
        state, start, end = self._at(t)
        if state is None or state.shadow is None or state.covers(start, end):
            return False
        now = _bytes(t, start, end)
        if now is None or torch.equal(now, state.shadow[start:end]):
            return False
        state.shadow[start:end] = now
        self._write(t, state, [(start, end)])
        return True

    def fresh(self, t: torch.Tensor, undefined: bool) -> None:
        """`t` is new memory a call returned: undefined (an `empty`, or computed from undefined values) or not."""
        key = _key(t)
        if key is None:
            return
        self._forget(key)
        if undefined:
            storage = t.untyped_storage()
            self._storages[key] = _Storage(storage.nbytes(), self._shadow(storage))

    def written(self, t: torch.Tensor, defined: bool, spans: Spans | None = None) -> None:
        """A recorded call wrote `t` (from defined values or not), at the byte `spans` of its storage given (an
        indexed write's positions) or else at every element of `t`; the shadow takes the bytes it wrote."""
        state, start, end = self._at(t)
        if state is None and defined:
            return
        if state is None:  # defined memory partly overwritten with undefined values
            key = _key(t)
            if key is None:
                return
            storage = t.untyped_storage()
            state = self._storages[key] = _Storage(storage.nbytes(), self._shadow(storage), [(0, storage.nbytes())])
        now = _bytes(t, start, end)
        if now is not None and state.shadow is not None:
            state.shadow[start:end] = now
        spans = view_spans(t) if spans is None else spans
        if defined and spans is not None:
            self._write(t, state, spans)
        elif not defined:
            for s, e in spans if spans is not None else [(start, end)]:
                state.remove(s, e)

    def _shadow(self, storage: torch.UntypedStorage) -> torch.Tensor | None:
        """A copy of `storage`'s bytes within the budget (the oldest shadows dropped to make room)."""
        size = storage.nbytes()
        if size > self._max_shadow_bytes:
            return None
        for state in self._storages.values():
            if self._shadow_bytes + size <= self._max_shadow_bytes:
                break
            if state.shadow is not None:
                self._shadow_bytes -= state.nbytes
                state.shadow = None
        copy = _storage_bytes(storage)
        if copy is not None:
            self._shadow_bytes += size
        return copy

    def _forget(self, key: int) -> None:
        state = self._storages.pop(key, None)
        if state is not None and state.shadow is not None:
            self._shadow_bytes -= state.nbytes

    def _write(self, t: torch.Tensor, state: _Storage, spans: Spans) -> None:
        merged = union(state.written, spans)
        if merged is None:
            return  # too finely interleaved to keep: those bytes stay undefined
        state.written = merged
        if state.covers(0, state.nbytes):
            key = _key(t)
            if key is not None:
                self._forget(key)

    def _at(self, t: torch.Tensor) -> tuple[_Storage | None, int, int]:
        key = _key(t)
        state = self._storages.get(key) if key is not None else None
        if state is None:
            return None, 0, 0
        size = t.element_size()
        start = int(t.storage_offset()) * size
        extent = int(t.storage_offset()) + sum((n - 1) * s for n, s in zip(t.shape, t.stride(), strict=True)) + 1
        return state, start, start if t.numel() == 0 else min(extent * size, state.nbytes)


def _key(t: torch.Tensor) -> int | None:
    if t.device.type == "meta" or t.layout != torch.strided or not data_ptr(t):
        return None
    return storage_key(t)


def _dense(t: torch.Tensor) -> bool:
    """Whether `t` covers its storage span without gaps (then a write to it writes the whole span)."""
    return bool(t.is_contiguous()) or t.numel() == 0


def _storage_bytes(storage: torch.UntypedStorage) -> torch.Tensor | None:
    if storage.device.type != "cpu":
        return None
    return torch.empty(0, dtype=torch.uint8).set_(storage).clone()


def _bytes(t: torch.Tensor, start: int, end: int) -> torch.Tensor | None:
    storage = t.untyped_storage()
    if storage.device.type != "cpu":
        return None
    return torch.empty(0, dtype=torch.uint8).set_(storage)[start:end]
