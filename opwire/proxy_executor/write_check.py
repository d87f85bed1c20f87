"""Undeclared writes into protected inputs, found by storage and bytes rather than by alias annotations.

Annotations cannot be trusted for this: admitted ops return views no schema declares (`_unsafe_view`,
`unsafe_split`, `einsum` with an identity equation), and kernels write arguments their schema does not mark
(`native_batch_norm` and `batch_norm` update `running_mean`/`running_var` in training mode). So a graph's first
run on an input layout is a **checking pass**: before each node, the byte span (data pointer, sizes, strides)
of every tensor the node receives is compared with the protected inputs' spans; when one reaches a protected
tensor, that tensor's bytes are kept and the reaching tensors' versions (`_version`) noted. After the node, a
changed byte or version is a BindError naming the node, the protected input and the tensor that reached it,
with the bytes put back first: the run stops and the protected tensors are as they were.

Protected: the top-level graph's parameters, constants and user inputs that its signature does not declare
mutated (buffers and mutated parameters are each run's own copies, and user inputs written by annotated ops run
on a copy: `graphchecks`); in a subgraph (cond branches, while_loop/map/scan bodies), every input.

A layout that passed is remembered, and later runs on it skip the pass (a handful of attribute reads). Its key:
the identity of each protected parameter and constant (the runner's own tensors), and the shape, strides, dtype
and device of every other tensor input (the value of a non-tensor input): what decides whether an op returns a
view or a copy, hence which nodes reach protected storage. Each subgraph is checked on its own first run, so a
branch first taken in a later run is checked then.

Limits: a kernel that writes without bumping a version (an unannotated write) and leaves the bytes as they were
in the checking pass, but changes them on later data, is not seen; nor is a write made outside every span the
node receives (torch's kernels write only through their arguments and outputs; outputs are new tensors).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from typing import Any

from opwire.errors import BindError

__all__ = ["Watch", "WriteCheck"]

_REMEMBERED = 64
"""Layouts a check remembers as passed (the oldest is forgotten first)."""

_SCALARS = (int, float, bool, str, type(None))


class WriteCheck:
    """The protected inputs of one graph and the input layouts whose checking pass found no undeclared write."""

    __slots__ = ("fixed", "labels", "shaped", "verified")

    def __init__(self, labels: Mapping[str, str], fixed: Iterable[str], inputs: Sequence[str]) -> None:
        self.labels = dict(labels)
        """Protected input name -> what it is ("parameter 'w'", "user input 'x'", "subgraph 'g' input 'x'")."""
        stable = set(fixed)
        self.fixed = tuple(n for n in inputs if n in stable and n in self.labels)
        """Protected names keyed by identity: the runner's parameters and constants, the same tensors every run."""
        self.shaped = tuple(n for n in inputs if n not in self.fixed)
        self.verified: dict[tuple[Any, ...], list[Any]] = {}
        """Layouts that passed -> weak references to the fixed tensors they name (an identity counts while its
        tensor lives: a freed tensor's id may be reused; strong references would keep old weights alive)."""

    def key(self, env: Mapping[str, Any]) -> tuple[Any, ...]:
        """The layout of the inputs in `env`: what a passed checking pass holds for."""
        key: list[Any] = [id(env.get(n)) for n in self.fixed]
        tensor, strided = _torch().Tensor, _torch().strided
        for n in self.shaped:
            v = env.get(n)
            if isinstance(v, tensor):  # a sparse tensor (a subgraph's input made by to_sparse_csr) has no strides
                key.append((v.shape, v.stride() if v.layout is strided else v.layout, v.dtype, v.device))
            else:
                key.append(v if isinstance(v, _SCALARS) else (type(v), id(v)))
        return tuple(key)

    def holds(self, key: tuple[Any, ...]) -> bool:
        """Whether layout `key` passed a checking pass (and the tensors it names by identity are those)."""
        refs = self.verified.get(key)
        if refs is None:
            return False
        for ref in refs:
            if ref is not None and ref() is None:
                del self.verified[key]  # a tensor it named was freed: its id may now name another
                return False
        return True

    def passed(self, key: tuple[Any, ...], env: Mapping[str, Any]) -> None:
        """Remember that a checking pass on layout `key` found no undeclared write."""
        if len(self.verified) >= _REMEMBERED:
            del self.verified[next(iter(self.verified))]
        self.verified[key] = [_weak(env.get(n)) for n in self.fixed]

    def regions(self, env: Mapping[str, Any]) -> list[tuple[int, int, Any, str, Any]]:
        """(start, end, device, label, tensor) of every protected tensor in `env` with bytes to protect."""
        torch, out = _torch(), []
        for name, label in self.labels.items():
            t = env.get(name)
            if isinstance(t, torch.Tensor) and t.layout == torch.strided and t.device.type != "meta":
                start, end = span(t)
                if end > start:
                    out.append((start, end, t.device, label, t))
        return out


class Watch:
    """Around one node of a checking pass: the protected tensors its arguments reach, their bytes and versions."""

    __slots__ = ("kept", "reaching", "where")

    def __init__(self, where: str, kept: list[tuple[str, Any, Any]], reaching: list[Any]) -> None:
        self.where = where
        self.kept = kept  # (label, the protected tensor's bytes, a copy of them before the node)
        self.reaching = reaching  # (argument name, tensor, version before, label it reaches)

    @staticmethod
    def before(
        where: str, names: Sequence[str], env: Mapping[str, Any], regions: list[tuple[int, int, Any, str, Any]]
    ) -> Watch | None:
        """What to watch while the node reading `names` runs (None: it reaches no protected tensor)."""
        torch = _torch()
        kept: dict[int, tuple[str, Any, Any]] = {}
        reaching = []
        for name in names:
            v = env.get(name)
            if not isinstance(v, torch.Tensor) or v.layout != torch.strided or v.device.type == "meta":
                continue
            start, end = span(v)
            for lo, hi, device, label, t in regions:
                if start < hi and lo < end and v.device == device:
                    reaching.append((name, v, v._version, label))
                    if id(t) not in kept:
                        bytes_now = _bytes(t, lo, hi)
                        kept[id(t)] = (label, bytes_now, bytes_now.clone())
        return Watch(where, list(kept.values()), reaching) if reaching else None

    def after(self) -> None:
        """BindError (the protected bytes put back first) when the node wrote into a protected tensor."""
        changed = self.restore()
        for name, v, version, label in self.reaching:
            if label in changed or v._version != version:
                raise BindError(
                    f"{self.where} writes into {label} through {name!r}, which shares its storage (an alias or a "
                    "write no op schema declares, e.g. _unsafe_view, unsafe_split, einsum's identity or "
                    "batch_norm's running stats); the program's signature declares no such write, so the run "
                    "stopped and the bytes were put back (re-export the program so torch records the mutation)"
                )

    def restore(self) -> set[str]:
        """Put back every kept tensor whose bytes changed; the labels of those."""
        changed, torch = set(), _torch()
        with torch.no_grad():
            for label, now, before in self.kept:
                if not torch.equal(now, before):
                    now.copy_(before)
                    changed.add(label)
        return changed


def _weak(v: Any) -> Any:
    try:
        return weakref.ref(v)
    except TypeError:  # None or a value that takes no weak reference: its id is kept by the key's own value
        return None


@cache
def _torch() -> Any:
    import torch  # deferred: the executor's modules import without torch until a graph runs

    return torch


def _bytes(t: Any, start: int, end: int) -> Any:
    """The bytes at addresses [start, end) of `t`'s storage, as a uint8 tensor viewing them (never a copy: an
    expanded view spans its storage's few bytes, not its elements)."""
    torch = _torch()
    storage = t.untyped_storage()
    flat = torch.empty(0, dtype=torch.uint8, device=t.device).set_(storage)
    base = storage.data_ptr()
    return flat[start - base : end - base]


def span(t: Any) -> tuple[int, int]:
    """The addresses [start, end) tensor `t` can touch."""
    if t.numel() == 0:
        return 0, 0
    item = t.element_size()
    lo = hi = 0
    for size, stride in zip(t.shape, t.stride(), strict=True):
        if stride < 0:
            lo += (size - 1) * stride
        else:
            hi += (size - 1) * stride
    base = t.data_ptr()
    return base + lo * item, base + (hi + 1) * item
