"""Which recorded tensor objects a chained replay holds as views of one another, and the writes each has seen.

A chained replay keeps one live tensor per recorded object. An object a recorded call returned on its input's
storage (a view, an in-place result) is a view of that input in the replay too: the two are one *group*. An
object the recording first met as an input is a group of its own, even when the program made it a view of
another outside the dispatcher (`nn.Parameter(t)`, FSDP2's unsharded parameters, `.data`): the replay rebuilds
it from its payload and cannot know the two share memory. A write through one group is then missed by the
other, whose live tensor goes stale; the recorder marks such a read `external`, so the replay takes the
recorded value as it does for writes no dispatch mode saw.
"""

from __future__ import annotations

__all__ = ["AliasGroups"]


class AliasGroups:
    """Groups of recorded objects that alias in a chained replay, and each group's last seen storage write."""

    def __init__(self) -> None:
        self._synced: dict[int, dict[int, int]] = {}  # group -> storage key -> generation its replay holds
        self._members: dict[int, int] = {}  # group -> live objects in it
        self._inputs: dict[int, int] = {}  # storage key -> group of an input of the current call

    def start_call(self) -> None:
        """A new call begins: the inputs it names are the ones its results can be views of."""
        self._inputs.clear()

    def join(self, number: int, key: int, produced: bool) -> int:
        """The group of new object `number` on storage `key` (a result on an input's storage joins its group)."""
        group = self._inputs.get(key, number) if produced else number
        self._members[group] = self._members.get(group, 0) + 1
        return group

    def leave(self, group: int) -> None:
        """An object of `group` was freed (the group is forgotten with its last one)."""
        left = self._members.get(group, 0) - 1
        if left > 0:
            self._members[group] = left
        else:
            self._members.pop(group, None)
            self._synced.pop(group, None)

    def named(self, group: int, key: int, generation: int, produced: bool) -> None:
        """An object of `group` was named at storage `key`'s `generation`: the group's replay holds that value."""
        self._synced.setdefault(group, {})[key] = generation
        if not produced:
            self._inputs.setdefault(key, group)

    def missed(self, group: int, key: int, generation: int) -> bool:
        """Whether storage `key` was written (at `generation`) through an object outside `group` since it last
        saw the storage: its live tensor in a chained replay does not hold the value being read."""
        seen = self._synced.get(group, {}).get(key)
        return seen is not None and seen != generation
