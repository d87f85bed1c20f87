"""paused_gc: no collection inside, bulk results promoted without a scan, other users of gc.freeze respected."""

from __future__ import annotations

import gc

import pytest

from opwire.serde._gc import BULK_OBJECTS, paused_gc


@pytest.fixture(autouse=True)
def _gc_enabled() -> None:
    was = gc.isenabled()
    gc.enable()
    yield  # type: ignore[misc]
    gc.unfreeze()
    (gc.enable if was else gc.disable)()


def test_collector_is_off_inside_and_restored() -> None:
    with paused_gc():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    with paused_gc():
        pass
    assert not gc.isenabled()


def _in_oldest(obj: object) -> bool:
    return any(o is obj for o in gc.get_objects(generation=2))


def test_bulk_results_go_straight_to_the_oldest_generation() -> None:
    gc.collect()
    with paused_gc():
        kept = [[i] for i in range(BULK_OBJECTS * 2)]
    assert gc.get_count()[0] < 1000  # nothing young left for the next allocation to scan
    assert _in_oldest(kept[-1])


def test_small_blocks_leave_generations_alone() -> None:
    gc.collect()
    with paused_gc():
        kept = [[i] for i in range(1000)]
    assert not _in_oldest(kept[-1])


def test_an_application_using_freeze_keeps_its_frozen_objects() -> None:
    gc.freeze()
    frozen = gc.get_freeze_count()
    with paused_gc():
        kept = [[i] for i in range(BULK_OBJECTS * 2)]
    assert gc.get_freeze_count() == frozen
    assert kept
