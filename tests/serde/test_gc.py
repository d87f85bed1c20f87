"""No codec touches the collector's process-wide state: the decoders keep what they build from it without a pause
(the C model builder, tests/serde/test_cbuild.py), the encoders allocate little."""

from __future__ import annotations

import gc

import pytest
from support import corpus

import opwire
from opwire.schema import models as m
from opwire.serde import FORMATS


@pytest.fixture(autouse=True)
def _gc_enabled() -> None:
    was = gc.isenabled()
    gc.enable()
    yield  # type: ignore[misc]
    (gc.enable if was else gc.disable)()


def test_encoders_leave_the_collector_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every encoder, Thrift and JSON (its reference path too), runs with the collector as the caller left it."""
    program = opwire.loads(corpus.get_serialized("mlp/training").json_bytes, m.ExportedProgram)
    toggled: list[str] = []
    monkeypatch.setattr(gc, "disable", lambda: toggled.append("disable"))
    for fmt in FORMATS:
        opwire.dumps(program, fmt)
    opwire.serde.json.encode(program, indent=2)  # the reference path (to_jsonable, json.dumps)
    assert toggled == []


def test_decoders_leave_the_collector_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every decoder, on its fast path and on its checking path, runs with the collector as the caller left it."""
    program = opwire.loads(corpus.get_serialized("mlp/training").json_bytes, m.ExportedProgram)
    encoded = {fmt: opwire.dumps(program, fmt) for fmt in FORMATS}
    toggled: list[str] = []
    monkeypatch.setattr(gc, "disable", lambda: toggled.append("disable"))
    monkeypatch.setattr(gc, "freeze", lambda: toggled.append("freeze"))
    monkeypatch.setattr(gc, "set_threshold", lambda *_: toggled.append("set_threshold"))
    for fmt, data in encoded.items():
        opwire.loads(data, m.ExportedProgram, fmt)
    opwire.serde.json.decode(b'{"type": "cpu", "type": "cuda"}', m.Device)  # a repeated key: pydantic's path
    opwire.serde.thrift.decode(encoded["compact"], m.ExportedProgram, "compact", engine="python")
    assert toggled == [] and gc.isenabled()
