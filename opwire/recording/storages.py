"""Storage identity for the recorder, and storages whose memory was replaced where no dispatch mode sees.

A storage is known by its `StorageImpl`, which keeps its identity when its memory is replaced
(`untyped_storage().resize_`, as FSDP2 frees and re-allocates its unsharded parameters between steps): a data
pointer would change under it. `Addresses` remembers where the memory of each storage that live recorded
tensors use was when the recording last saw it; a storage found elsewhere that no recorded call moved was
re-allocated outside the dispatcher, and holds new memory whose bytes are undefined until written.

Memory the program manages itself (allocated uninitialised, or seen re-allocated) can also be freed where no mode
sees: such storages are *managed*, and the recorder has their values written before the program goes on.
"""

from __future__ import annotations

import torch

__all__ = ["Addresses", "data_ptr", "storage_key"]


def storage_key(t: torch.Tensor) -> int:
    """The identity of `t`'s storage (stable while its memory is replaced); `-id(t)` for a tensor without one."""
    try:
        return int(t.untyped_storage()._cdata)
    except (RuntimeError, NotImplementedError):
        return -id(t)


def data_ptr(t: torch.Tensor) -> int:
    """Where `t`'s storage keeps its bytes now (0 for none: freed, resized to 0, meta, or no storage)."""
    try:
        return int(t.untyped_storage().data_ptr())
    except (RuntimeError, NotImplementedError):
        return 0


class Addresses:
    """Where the memory of each storage live recorded tensors use was last seen, and moves no call made."""

    def __init__(self) -> None:
        self._at: dict[int, list[int]] = {}  # storage key -> [data pointer, live tensor objects on it, managed]

    def hold(self, key: int, t: torch.Tensor) -> None:
        """A recorded tensor object on storage `key` came to life (its memory is where it is now)."""
        entry = self._at.get(key)
        if entry is None:
            self._at[key] = [data_ptr(t), 1, 0]
        else:
            entry[1] += 1

    def release(self, key: int) -> None:
        """A recorded tensor object on storage `key` was freed (the storage is forgotten with its last one)."""
        entry = self._at.get(key)
        if entry is not None:
            entry[1] -= 1
            if entry[1] <= 0:
                del self._at[key]

    def moved(self, key: int, t: torch.Tensor) -> bool:
        """Whether `t`'s storage has new memory since last seen (then it is seen there from now on).

        Memory resized to nothing and back is new memory too; a storage with none now has no bytes to read.
        """
        entry = self._at.get(key)
        if entry is None:
            return False
        now = data_ptr(t)
        if now == entry[0]:
            return False
        entry[0] = now
        entry[2] = 1
        return now != 0

    def seen(self, key: int, t: torch.Tensor) -> None:
        """A recorded call has run with `t`: its storage's memory is where the call left it."""
        entry = self._at.get(key)
        if entry is not None:
            entry[0] = data_ptr(t)

    def manage(self, key: int) -> None:
        """Storage `key` is memory the program manages itself (an `empty` it fills, frees or reuses)."""
        entry = self._at.get(key)
        if entry is not None:
            entry[2] = 1

    def managed(self, key: int) -> bool:
        """Whether storage `key` was allocated uninitialised or seen re-allocated outside the dispatcher."""
        entry = self._at.get(key)
        return entry is not None and entry[2] == 1
