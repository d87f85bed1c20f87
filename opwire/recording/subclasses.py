"""Tensor subclasses the recorder records through: wrappers run their ops on plain tensors, fakes have no values.

A subclass that wraps plain tensors and dispatches ops on them (`__tensor_flatten__`: DTensor, a functional
collective's `AsyncCollectiveTensor`, `TwoTensor`) is not recorded itself: the recorder's mode answers
`NotImplemented`, the subclass runs, and the calls it makes on its local tensors (with the mode still active)
are what the trace holds. Fake tensors (DTensor's sharding rules run ops on them) carry metadata only: their
calls compute no values and are not recorded.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

import torch

__all__ = ["in_fake_mode", "unwrap_async", "wraps_any"]

_FAKE = torch._C._TorchDispatchModeKey.FAKE


def wraps_any(types: Iterable[type]) -> bool:
    """Whether any of the subclasses a call's arguments have wraps plain tensors (`__tensor_flatten__`)."""
    return any(hasattr(cls, "__tensor_flatten__") for cls in types)


def in_fake_mode(types: Iterable[type]) -> bool:
    """Whether a call runs on fake tensors: fake tensor mode is active, or an argument is a FakeTensor."""
    if torch._C._get_dispatch_mode(_FAKE) is not None:
        return True
    fake = sys.modules.get("torch._subclasses.fake_tensor")
    return fake is not None and any(issubclass(cls, fake.FakeTensor) for cls in types)


def unwrap_async(t: torch.Tensor) -> torch.Tensor:
    """A functional collective's AsyncCollectiveTensor is named as the tensor it wraps (already waited for)."""
    funcol = sys.modules.get("torch.distributed._functional_collectives")
    if funcol is not None and isinstance(t, funcol.AsyncCollectiveTensor):
        return t.elem  # type: ignore[no-any-return]
    return t
