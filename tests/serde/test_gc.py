"""paused_gc: no collection inside, the caller's state restored, no gc.freeze, safe from several threads."""

from __future__ import annotations

import gc
import threading

import pytest

from opwire.serde._gc import paused_gc


@pytest.fixture(autouse=True)
def _gc_enabled() -> None:
    was = gc.isenabled()
    gc.enable()
    yield  # type: ignore[misc]
    (gc.enable if was else gc.disable)()


def test_collector_is_off_inside_and_restored() -> None:
    with paused_gc():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    with paused_gc():
        pass
    assert not gc.isenabled()


def test_young_objects_of_the_process_stay_young() -> None:
    """No gc.freeze behind the caller's back: the caller's young objects are not promoted."""
    gc.collect()
    mine = [[i] for i in range(1000)]
    with paused_gc():
        kept = [[i] for i in range(200_000)]
    assert gc.get_freeze_count() == 0
    assert not any(o is mine[-1] for o in gc.get_objects(generation=2))
    assert kept


def test_concurrent_blocks_restore_the_state_once_all_leave() -> None:
    inside = threading.Barrier(3)
    leave = threading.Event()

    def block() -> None:
        with paused_gc():
            inside.wait()
            leave.wait()

    threads = [threading.Thread(target=block) for _ in range(2)]
    for t in threads:
        t.start()
    inside.wait()
    assert not gc.isenabled()
    leave.set()
    for t in threads:
        t.join()
    assert gc.isenabled()
