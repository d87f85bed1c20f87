"""Seeing in-place edits of models cheaply: counted lists and identity snapshots.

Work derived from a model (the executor's bound plans) must not outlive an edit of that model. Pydantic
validates attribute assignment, and opwire's models count every assignment (`base.edit_count`), but a
list field mutated in place (`node.inputs.append(...)`) bypasses the model. `track(model)` swaps every
list inside `model` for a `CountedList`, a list that counts its own mutations the same way; after that,
"has anything changed since I looked?" is one integer comparison. `snapshot(model)` records the identity
of every object inside a model, so that when the count moved, `unchanged(snapshot, model)` tells whether
this model is among the edited ones.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, SupportsIndex

from pydantic import BaseModel

from opwire.schema.base import count_edit, edit_count

__all__ = ["CountedList", "edit_count", "snapshot", "track", "unchanged"]


class CountedList(list[Any]):
    """A list whose in-place mutations count as model edits (reads cost what a list's reads cost)."""

    __slots__ = ()

    def append(self, item: Any) -> None:
        """Append and count the edit."""
        count_edit()
        super().append(item)

    def extend(self, items: Iterable[Any]) -> None:
        """Extend and count the edit."""
        count_edit()
        super().extend(items)

    def insert(self, index: SupportsIndex, item: Any) -> None:
        """Insert and count the edit."""
        count_edit()
        super().insert(index, item)

    def remove(self, item: Any) -> None:
        """Remove and count the edit."""
        count_edit()
        super().remove(item)

    def pop(self, index: SupportsIndex = -1) -> Any:
        """Pop and count the edit."""
        count_edit()
        return super().pop(index)

    def clear(self) -> None:
        """Clear and count the edit."""
        count_edit()
        super().clear()

    def sort(self, *args: Any, **kwargs: Any) -> None:
        """Sort and count the edit."""
        count_edit()
        super().sort(*args, **kwargs)

    def reverse(self) -> None:
        """Reverse and count the edit."""
        count_edit()
        super().reverse()

    def __setitem__(self, index: Any, value: Any) -> None:
        """Replace items and count the edit."""
        count_edit()
        super().__setitem__(index, value)

    def __delitem__(self, index: Any) -> None:
        """Delete items and count the edit."""
        count_edit()
        super().__delitem__(index)

    def __iadd__(self, items: Iterable[Any]) -> CountedList:  # type: ignore[misc]
        """`+=` and count the edit."""
        count_edit()
        super().extend(items)
        return self

    def __imul__(self, n: SupportsIndex) -> CountedList:
        """`*=` and count the edit."""
        count_edit()
        super().__imul__(n)
        return self

    def __reduce_ex__(self, protocol: SupportsIndex) -> Any:
        """Copies are plain lists again: a copy is not what anything was derived from."""
        return (list, (list(self),))


def _counted(value: list[Any]) -> CountedList:
    out = value if type(value) is CountedList else CountedList(value)
    for i, e in enumerate(out):
        if type(e) is list:
            list.__setitem__(out, i, _counted(e))
        elif isinstance(e, BaseModel):
            track(e)
    return out


def track(model: BaseModel) -> None:
    """Make every list inside `model` a `CountedList`, so that its in-place edits move `edit_count()`."""
    d = model.__dict__
    for k, v in d.items():
        if type(v) is list:
            d[k] = _counted(v)
        elif type(v) is CountedList:
            _counted(v)
        elif isinstance(v, BaseModel):
            track(v)


def _walk(obj: BaseModel, out: list[Any]) -> None:
    out.append(obj)
    for v in obj.__dict__.values():
        out.append(v)
        if isinstance(v, BaseModel):
            _walk(v, out)
        elif isinstance(v, list):
            _walk_list(v, out)


def _walk_list(values: list[Any], out: list[Any]) -> None:
    out.append(len(values))
    for e in values:
        out.append(e)
        if isinstance(e, BaseModel):
            _walk(e, out)
        elif isinstance(e, list):
            _walk_list(e, out)


def snapshot(model: BaseModel) -> list[Any]:
    """The identity of every object inside `model`, in a fixed order (compare with `unchanged`)."""
    out: list[Any] = []
    _walk(model, out)
    return out


def unchanged(before: list[Any], model: BaseModel) -> bool:
    """Whether `model` still holds exactly the objects `before` recorded (no edit at any depth)."""
    now = snapshot(model)
    return len(now) == len(before) and all(a is b for a, b in zip(now, before, strict=True))
