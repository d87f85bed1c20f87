"""How a recording names tensor values: `t<N>` for the N-th tensor object seen, `t<N>.<k>` for its k-th later value.

A later value is what a tensor holds after a recorded call wrote to its storage (an in-place op, or a write
through a view), so a name says both which object and which value: chained replay maps `t<N>` to one live
tensor (views and in-place writes keep their aliasing), isolated replay rebuilds each value from its own
payload. A value goes to the sink when it is first named (the stream sink writes it to disk then), so nothing
is kept alive for the trace; a tensor object that the program frees is reported, so a chained replay can let
go of it too.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from opwire.recording.aliases import AliasGroups
from opwire.recording.definedness import Definedness
from opwire.recording.sinks import Sink
from opwire.recording.storages import Addresses, storage_key
from opwire.recording.subclasses import unwrap_async

__all__ = ["TensorNames", "object_of"]


def object_of(name: str) -> str:
    """The tensor-object part of a trace tensor name (`t3.2` -> `t3`)."""
    return name.partition(".")[0]


@dataclass
class _Obj:
    ref: weakref.ref[torch.Tensor]
    number: int
    storage: int
    group: int
    versions: dict[int, str] = field(default_factory=dict)


class TensorNames:
    """The trace names of the tensor values a recording has seen, by object identity and storage generation."""

    def __init__(self, sink: Sink, digest: bool, defs: Definedness, addresses: Addresses, aliases: AliasGroups) -> None:
        self.sink = sink
        self.digest = digest  # results are kept as digests (outputs="digest"), inputs always in full
        self.defs = defs
        self.addresses = addresses
        self.aliases = aliases
        self._full: dict[str, bool] = {}  # name -> whether its bytes were kept (else a digest)
        self._objs: dict[int, _Obj] = {}
        self._count = 0
        # storage -> how many recorded calls wrote to it (torch's _version is bumped above the dispatch mode)
        self._generation: dict[int, int] = {}
        self._dead: list[str] = []  # objects freed since `take_freed` last ran

    def name(self, t: torch.Tensor, produced: bool, tracked: bool) -> str:
        """The trace name of `t`'s current value; a new value is handed to the sink now (bytes or digest).

        `produced`: `t` is a result of the call being recorded (else an argument); `tracked`: the call's results
        are already in `defs` (an input is named before its call, a result after the mode tracked it)."""
        t = unwrap_async(t)
        obj = self._objs.get(id(t))
        key = storage_key(t)
        if obj is None or obj.ref() is not t:
            self._count += 1
            group = self.aliases.join(self._count, key, produced)
            obj = _Obj(weakref.ref(t, self._freed_callback(id(t), self._count, key, group)), self._count, key, group)
            self._objs[id(t)] = obj
            self.addresses.hold(key, t)
        version = self._generation.get(key, 0)
        self.aliases.named(obj.group, key, version, produced)
        name = obj.versions.get(version)
        if name is None:
            k = len(obj.versions)
            name = f"t{obj.number}" if k == 0 else f"t{obj.number}.{k}"
            if (tracked or not produced) and self.defs.blank(t):
                self.sink.undefined(name, t)  # no defined byte: nothing to keep (a partly defined value is kept)
                full = True
            else:
                full = not (produced and self.digest)
                self.sink.tensor(name, t, full, (key, version))
            obj.versions[version] = name
            self._full[name] = full
        elif not produced and not self._full[name]:
            self.sink.tensor(name, t, True, (key, version))  # a value read again must be rebuildable
            self._full[name] = True
        return name

    def _freed_callback(self, ident: int, number: int, storage: int, group: int) -> Callable[..., None]:
        dead, objs, addresses, aliases = self._dead, self._objs, self.addresses, self.aliases

        def freed(ref: weakref.ref[torch.Tensor]) -> None:
            dead.append(f"t{number}")
            addresses.release(storage)
            aliases.leave(group)
            obj = objs.get(ident)
            if obj is not None and obj.ref is ref:
                del objs[ident]

        return freed

    def bump(self, t: torch.Tensor) -> None:
        """The next call writes to `t`'s storage: later reads of every value on it get new names."""
        key = storage_key(t)
        self._generation[key] = self._generation.get(key, 0) + 1
        self.sink.before_write(t)

    def missed(self, t: torch.Tensor, key: int) -> bool:
        """Whether `t` (on storage `key`) was written through an alias since it was named: a chained replay's
        live tensor does not hold the value about to be read."""
        obj = self._objs.get(id(t))
        return obj is not None and obj.ref() is t and self.aliases.missed(obj.group, key, self._generation.get(key, 0))

    def take_freed(self) -> list[str]:
        """The objects freed since the last call, forgotten here (the caller hands them to the sink)."""
        dead, self._dead[:] = list(self._dead), []
        return dead
