"""The C model builder (opwire/serde/_cbuild_src, plan from serde/_cplan.py): loaded where the tests run, and
agreeing with the Python paths on mutated bytes.

JSON: whatever the C parser and builder take from mutated JSON, pydantic's validation takes and builds the
same (fields sets included); what pydantic refuses, the C path declines. Thrift: the C reader takes exactly
what the fastbinary path (Apache Thrift's C codec, the IDL builders and the re-encode check) takes, builds the
same models and counts the same values. Hostile bytes, repeated decodes (no leak) and the collector (every
model tracked again, no process-wide setting touched) are checked too.
"""

from __future__ import annotations

import gc
import json
import tracemalloc
import weakref
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError
from support import corpus
from support.typed import MODEL_NAMES, assert_identical, mutate_bytes, strategy_for

import opwire
from opwire.schema import models as m
from opwire.serde import FORMATS, _cplan, thrift
from opwire.serde._thrift import fast

_SPLICES = [b"{", b"}", b"[", b"]", b'"', b",", b":", b"\\", b"\\u", b"\\ud800", b"0", b"-", b"1e999", b"NaN",
            b"null", b"true", b" ", b"\x00", b"\xff", b"\xc3\xa9", b'"as_int": 1', b'{"a": 1}']  # fmt: skip


def test_the_c_builder_is_loaded() -> None:
    """The tests (and CI's fresh clone, built by `pip install -e .`) run the C module, not the Python fallback."""
    assert _cplan.AVAILABLE
    from opwire.serde import _cbuild

    assert _cbuild.__file__.endswith(".so")
    assert _cplan.json_build("SymInt", b'{"as_int": 3}') == m.SymInt(as_int=3)  # the plan of the IDL compiles


@st.composite
def _json_cases(draw: st.DrawFn) -> tuple[str, bytes]:
    name = draw(st.sampled_from(MODEL_NAMES))
    return name, mutate_bytes(opwire.dumps(draw(strategy_for(name))), draw, _SPLICES, 300)


@settings(max_examples=500, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(case=_json_cases())
def test_mutated_json_bytes_build_as_pydantic_validates(case: tuple[str, bytes]) -> None:
    name, data = case
    built = _cplan.json_build(name, data)
    try:
        reference = m.MODELS[name].model_validate_json(data)
    except ValidationError:
        assert built is None, f"the C path took what pydantic refuses: {data[:300]!r}"
        return
    if built is not None:
        assert_identical(built, reference)


def test_json_the_parser_declines() -> None:
    """Valid JSON the strict parser leaves to pydantic-core's parser, and nesting past its limit: declined."""
    assert _cplan.json_build("Device", b'{"type": "cpu", "type": "cuda"}') is None  # a repeated key
    assert _cplan.json_build("ComplexValue", b'{"real": NaN, "imag": 1.0}') is None
    assert _cplan.json_build("SymInt", b'{"as_int": 1' + b"0" * 50 + b"}") is None
    deep = b'{"as_list": ' * 5000 + b"[]" + b"}" * 5000
    assert _cplan.json_build("Argument", deep) is None
    doc = b'{"type": "cpu\\u00e9", "index": -12}'
    for cut in range(len(doc)):  # every prefix of a document is refused, none crashes
        assert _cplan.json_build("Device", doc[:cut]) is None
    assert _cplan.json_build("Device", doc).type == "cpu\u00e9"


@st.composite
def _thrift_cases(draw: st.DrawFn) -> tuple[str, str, bytes]:
    name = draw(st.sampled_from(MODEL_NAMES))
    codec = draw(st.sampled_from(("binary", "compact")))
    payload = fast.encode(draw(strategy_for(name)), codec)
    if draw(st.booleans()):
        payload = mutate_bytes(
            payload, draw, [b"\x00", b"\x01", b"\x02", b"\x7f\xff\xff\xff", b"\xff\xff\xff\xff\x0f"], 300
        )
    return name, codec, payload


def _fast(payload: bytes, name: str, codec: str, limit: int) -> tuple[Any, int] | str | None:
    try:
        return fast.decode(payload, 0, name, codec, limit)
    except fast.TooMany:
        return "too many"


def _c(payload: bytes, name: str, codec: str, limit: int) -> tuple[Any, int] | str | None:
    try:
        return _cplan.thrift_build(payload, 0, name, codec, limit)
    except _cplan.TooMany:
        return "too many"


@settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(case=_thrift_cases(), limit=st.sampled_from([3, 20, 10**9]))
def test_mutated_thrift_bytes_read_as_the_fastbinary_path(case: tuple[str, str, bytes], limit: int) -> None:
    name, codec, payload = case
    theirs, ours = _fast(payload, name, codec, 10**9), _c(payload, name, codec, 10**9)
    assert (theirs is None) == (ours is None), f"{codec} {name}: fastbinary {theirs is not None}, C {ours}"
    if isinstance(theirs, tuple) and isinstance(ours, tuple):
        assert_identical(ours[0], theirs[0])
        assert ours[1] == theirs[1]
        assert (_c(payload, name, codec, limit) == "too many") == (ours[1] > limit)


def _program() -> BaseModel:
    return opwire.loads(corpus.get_serialized("mlp/training").json_bytes, m.ExportedProgram)


@pytest.mark.parametrize("codec", ["binary", "compact"])
def test_thrift_hostile_lengths_and_nesting_are_declined(codec: str) -> None:
    payload = fast.encode(_program(), codec)
    assert _cplan.thrift_build(payload, 0, "ExportedProgram", codec, 10**9) is not None
    assert _cplan.thrift_plain(payload, "ExportedProgram", codec, 10**9) is not None
    for cut in range(0, len(payload), max(1, len(payload) // 300)):  # truncated anywhere: declined, no overread
        assert _cplan.thrift_build(payload[:cut], 0, "ExportedProgram", codec, 10**9) is None
        assert _cplan.thrift_plain(payload[:cut], "ExportedProgram", codec, 10**9) is None
    assert _cplan.thrift_build(payload + b"\x00", 0, "ExportedProgram", codec, 10**9) is None  # a byte left over
    huge = b"\x7f\xff\xff\xff" if codec == "binary" else b"\xff\xff\xff\xff\x07"
    for pos in range(0, len(payload), max(1, len(payload) // 200)):
        mutated = payload[:pos] + huge + payload[pos + len(huge) :]
        _c(mutated, "ExportedProgram", codec, 10**9)  # declined or read; never past the buffer
        _cplan.thrift_plain(mutated, "ExportedProgram", codec, 10**9)
    union = b"\x0f\x00\xd2\x0c\x00\x00\x00\x01" if codec == "binary" else b"\x09\x00"  # Argument.as_list, opened
    nested = b"".join([union] * 70)  # deeper than 64 structs: the checking decoder's
    assert _cplan.thrift_build(nested, 0, "Argument", codec, 10**9) is None
    assert _cplan.thrift_plain(nested, "Argument", codec, 10**9) is None


def _leaks(fn: Callable[[], object]) -> int:
    """Bytes still allocated after 60 more calls of `fn` than after 10.

    The objects that existed before are frozen (moved out of the collector's reach) meanwhile: a collection then
    visits only what `fn` made, so each is milliseconds instead of ~0.5 s over a worker's ~400k objects (torch's),
    and collects the same garbage (only `fn`'s objects are allocated while memory is traced).
    """
    host = gc.get_freeze_count()  # the suite's own freeze (tests/conftest.py): put back after
    gc.freeze()
    try:
        for _ in range(10):
            fn()
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(60):
            fn()
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
    finally:
        gc.unfreeze()
        if host:
            gc.freeze()
    return after - before


def test_repeated_decodes_leak_nothing() -> None:
    data = corpus.get_serialized("mlp/training").json_bytes
    program = _program()
    payloads = {codec: fast.encode(program, codec) for codec in ("binary", "compact")}
    bad_json = data.replace(b'"as_tensor"', b'"as_tensr"', 1)  # built partly, then declined
    cases: list[Callable[[], object]] = [
        lambda: _cplan.json_build("ExportedProgram", data),
        lambda: _cplan.json_build("ExportedProgram", bad_json),
        lambda: _cplan.json_build("ExportedProgram", json.loads(data)),
    ]
    for codec, payload in payloads.items():
        cases.append(lambda p=payload, c=codec: _cplan.thrift_build(p, 0, "ExportedProgram", c, 10**9))
        cases.append(lambda p=payload, c=codec: _cplan.thrift_build(p[:-7], 0, "ExportedProgram", c, 10**9))
        cases.append(lambda p=payload, c=codec: _c(p, "ExportedProgram", c, 100))
        cases.append(lambda p=payload, c=codec: _cplan.thrift_plain(p, "ExportedProgram", c, 100))
        cases.append(lambda p=payload, c=codec: _cplan.thrift_plain(p[:-7], "ExportedProgram", c, 10**9))
    for case in cases:
        assert _leaks(case) < 20_000


def test_decoded_models_are_tracked_and_the_collector_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """No process-wide state: the collector is neither disabled nor retuned, and every model, list, fields set and
    dict that may hold a cycle the C module built is tracked again when the decode returns."""
    data = corpus.get_serialized("mlp/training").json_bytes
    toggled: list[str] = []
    monkeypatch.setattr(gc, "disable", lambda: toggled.append("disable"))
    monkeypatch.setattr(gc, "freeze", lambda: toggled.append("freeze"))
    threshold = gc.get_threshold()
    programs = [opwire.loads(data if fmt == "json" else opwire.dumps(_program(), fmt), m.ExportedProgram, fmt)
                for fmt in FORMATS if fmt in ("json", "binary", "compact")]  # fmt: skip
    plain = [thrift.decode_plain(thrift.encode(_program(), fmt, framed=False), m.ExportedProgram, fmt)
             for fmt in ("binary", "compact")]  # fmt: skip
    assert toggled == [] and gc.get_threshold() == threshold and gc.isenabled()
    assert all(p is not None for p in plain)
    for program in plain:  # plain objects and their lists and dicts alike
        todo = [program]
        while todo:
            v = todo.pop()
            if isinstance(v, SimpleNamespace):
                assert gc.is_tracked(v)
                todo += vars(v).values()
            elif isinstance(v, list):
                assert gc.is_tracked(v) or not v
                todo += v
            elif isinstance(v, dict):
                assert gc.is_tracked(v) or not any(gc.is_tracked(x) for x in v.values())
                todo += v.values()
    for program in programs:
        todo: list[Any] = [program]
        while todo:
            v = todo.pop()
            if isinstance(v, BaseModel):
                assert gc.is_tracked(v) and gc.is_tracked(v.__pydantic_fields_set__)
                todo += v.__dict__.values()
            elif isinstance(v, list):
                assert gc.is_tracked(v) or not v
                todo += v
            elif isinstance(v, dict):  # untracked only when no value can hold a cycle, as CPython keeps dicts
                assert gc.is_tracked(v) or not any(gc.is_tracked(x) for x in v.values())
                todo += v.values()


class _Box:
    """Something weakly referable to close a cycle with."""

    node: Any = None


def _cycle_through_a_decoded_model(data: bytes) -> weakref.ref[_Box]:
    box = _Box()
    box.node = opwire.loads(data, m.ExportedProgram).graph_module.graph.nodes[0]
    box.node.metadata["cycle"] = box  # box -> node -> its metadata dict -> box
    return weakref.ref(box)


def test_a_cycle_through_a_decoded_model_is_collected() -> None:
    ref = _cycle_through_a_decoded_model(corpus.get_serialized("mlp/training").json_bytes)
    gc.collect()
    assert ref() is None


@pytest.mark.parametrize("codec", ["binary", "compact"])
def test_a_thrift_decode_builds_each_repeated_string_once(codec: str) -> None:
    """Equal strings of one decode are one object (thrift_strings.h), and equal to what was written: ASCII ones
    share, others (not cached) are built each time; a second decode builds its own."""
    names = [f"tensor_{i % 7}" for i in range(400)] + ["é_0", "é_0"]  # (CPython shares one-letter strings itself)
    value = m.Argument(as_strings=names)
    first, second = (thrift.decode(thrift.encode(value, codec), m.Argument, codec) for _ in range(2))
    assert first == value and first.as_strings == names
    got = first.as_strings
    assert got is not None and len({id(s) for s in got[:400]}) == 7
    assert got[400] is not got[401]
    assert second.as_strings is not None and second.as_strings[0] is not got[0]


_AS_NONE = {"compact": (b"\xa1\x00", b"\xa3\x00"), "binary": (b"\x02\x00\n\x01\x00", b"\x02\x00\n\x07\x00")}
"""Argument(as_none=True) as each codec writes it, and the same with a byte no canonical encoding has (compact: a
bool field of wire type 3; binary: a bool of value 7)."""


@pytest.mark.parametrize("codec", ["binary", "compact"])
def test_a_list_past_the_budget_ends_as_building_it_would(codec: str) -> None:
    """A list whose items cannot fit what is left of the budget (thrift_read.c reads them without building):
    refused past the budget where its bytes hold, declined where a byte stops being canonical before the budget
    runs out, refused where the budget runs out first; a map's repeated key likewise."""
    n = 1000
    item, bad = _AS_NONE[codec]
    payload = fast.encode(
        m.Node(target="aten.x", inputs=[], outputs=[m.Argument(as_none=True)] * n, metadata={}), codec
    )
    start = payload.find(item * n)
    assert start > 0 and _c(payload, "Node", codec, 10**9)[1] == 2005  # type: ignore[index]
    # Node, target, inputs, outputs: 4 values, then 2 an item (the union and its member), then the metadata map
    assert _c(payload, "Node", codec, 2005)[1] == 2005  # type: ignore[index]
    assert _c(payload, "Node", codec, 2004) == "too many"
    assert _c(payload, "Node", codec, 1500) == "too many"
    at = start + 500 * len(item)  # item 500 made not canonical: the budget of 1500 runs out at item 748
    broken = payload[:at] + bad + payload[at + len(bad) :]
    assert _c(broken, "Node", codec, 10**9) is None
    assert _c(broken, "Node", codec, 1500) is None
    assert _c(broken, "Node", codec, 500) == "too many"  # runs out at item 248, before the bad byte
    keys = [f"k{i:04}" for i in range(n)]
    payload = fast.encode(m.Node(target="aten.x", inputs=[], outputs=[], metadata=dict.fromkeys(keys, "v")), codec)
    assert _c(payload, "Node", codec, 10**9)[1] == 1005  # type: ignore[index]  # keys are not counted
    assert _c(payload, "Node", codec, 800) == "too many"
    repeated = payload.replace(b"k0500", b"k0499")
    assert _c(repeated, "Node", codec, 10**9) is None
    assert _c(repeated, "Node", codec, 800) is None  # the repeat at entry 500, the budget out at 796
    assert _c(repeated, "Node", codec, 300) == "too many"


def test_a_million_structs_past_the_budget_are_refused_without_building_them() -> None:
    """The hostile table's `as_none_amplification` (tests/support/hostile.py): 2 MB of compact bytes declaring a
    million `Argument(as_none=True)`, two values each against a budget of 2,000,000. Refused with no model built
    (building them up to the budget allocated hundreds of MB): the decode's peak allocation stays small."""
    n = 1_000_000
    head = fast.encode(
        m.Node(target="aten.x", inputs=[], outputs=[m.Argument(as_none=True)] * 16, metadata={}), "compact"
    )
    payload = head.replace(b"\xa9\xfc\x10" + b"\xa1\x00" * 16, b"\xa9\xfc\xc0\x84=" + b"\xa1\x00" * n)
    assert len(payload) > 2 * n
    tracemalloc.start()
    try:
        with pytest.raises(opwire.DecodeError, match=r"exceeds the budget max_elements=2000000"):
            thrift.decode(payload, m.Node, "compact", framed=False, max_elements=2_000_000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20, f"{peak:,} bytes allocated at the peak"
