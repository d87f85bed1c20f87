"""`young_heap`: the objects alive on entry are out of the collector's passes during the block, and the host's
own frozen objects and collector setting are left exactly as they were."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from opwire.recording.distributed.share import young_heap


@pytest.fixture(autouse=True)
def _thawed() -> Iterator[None]:
    """Each test starts from a heap nobody froze (the suite's conftest freezes what collection imported); the
    suite's freeze is put back after."""
    was = gc.get_freeze_count()
    gc.unfreeze()
    yield
    if was:  # what is alive now was alive before, or the test's own few objects: no collection first
        gc.freeze()


def test_the_heap_alive_on_entry_is_frozen_inside_and_thawed_after() -> None:
    assert gc.get_freeze_count() == 0
    with young_heap():
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0


def test_a_host_that_froze_objects_keeps_them_frozen() -> None:
    gc.freeze()
    try:
        # A frozen object that dies leaves the count (the block's own frames may free a few): what must not happen
        # is the block freezing the young objects too, or thawing the host's (the count back to 0)
        frozen = gc.get_freeze_count()
        with young_heap():
            assert frozen - 100 <= gc.get_freeze_count() <= frozen
        assert frozen - 100 <= gc.get_freeze_count() <= frozen
    finally:
        gc.unfreeze()


def test_a_host_with_the_collector_off_is_left_alone() -> None:
    gc.disable()
    try:
        with young_heap():
            assert gc.get_freeze_count() == 0
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_an_error_in_the_block_still_thaws() -> None:
    try:
        with young_heap():
            raise ValueError("inside")
    except ValueError:
        pass
    assert gc.get_freeze_count() == 0
