"""paused_gc: no collection inside, the caller's state restored, no gc.freeze, safe from several threads."""

from __future__ import annotations

import gc
import threading

import pytest
from support import corpus

import opwire
from opwire.schema import models as m
from opwire.serde import FORMATS
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


def test_encoders_leave_the_collector_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the bulk decoders pause the collector: every encoder, Thrift and JSON (its reference path too), runs
    with it as the caller left it."""
    program = opwire.loads(corpus.get_program("mlp/training").json_bytes, m.ExportedProgram)
    toggled: list[str] = []
    monkeypatch.setattr(gc, "disable", lambda: toggled.append("disable"))
    for fmt in FORMATS:
        opwire.dumps(program, fmt)
    opwire.serde.json.encode(program, indent=2)  # the reference path (to_jsonable, json.dumps)
    assert toggled == []
