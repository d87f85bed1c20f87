"""The archive scan (serde/_thrift/tables.py) with the C module's skip (`_cbuild_src/thrift_skip.c`) and without it:
the same positions and the same errors in the same words on the corpus, on drawn archives, and on mutated and
hostile bytes; and the C skip alone agrees with the checking decoder's `skip` wherever it answers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import corpus
from support.fuzz_child import Child, child_fixture
from support.typed import MODEL_NAMES, mutate_bytes, strategy_for

from opwire.errors import DecodeError
from opwire.schema import models as m
from opwire.serde import framing, thrift, torch_bridge
from opwire.serde._thrift import fast, tables
from opwire.serde._thrift.binary import BinaryReader, WireError
from opwire.serde._thrift.compact import CompactReader
from opwire.serde._thrift.decode import Located, _Decoder
from opwire.serde._thrift.spec import LIST, MAP, SET, STRUCT
from opwire.serde._thrift.stack import run_frames

CODECS = ("binary", "compact")
_SPLICES = [b"\x00", b"\x01", b"\x02", b"\x0c", b"\x0f", b"\x19", b"\x1b", b"\x7f\xff\xff\xff", b"\xff\xff\xff\xff\x0f"]
_BUDGETS = st.sampled_from([0, 3, 40, 500, 10**9])
_DEPTHS = st.sampled_from([1, 2, 3, 6, framing.MAX_DEPTH])

Scanned = dict[str, dict[str, tables.Entry]] | tuple[str, str]


def _scan(data: bytes, codec: str, native: bool, max_elements: int, max_depth: int) -> Scanned:
    """The scan's tables, or its DecodeError's message and path."""
    try:
        return tables.scan(data, 0, codec, "a.bin", max_elements, max_depth, native=native)
    except DecodeError as exc:
        return str(exc), exc.path


def _same_scan(data: bytes, codec: str, max_elements: int = 10**9, max_depth: int = framing.MAX_DEPTH) -> Scanned:
    """The scan with the C skip and without: asserted the same (positions, or the words of the error)."""
    ours = _scan(data, codec, True, max_elements, max_depth)
    assert ours == _scan(data, codec, False, max_elements, max_depth)
    return ours


def _archive(name: str) -> m.OpwireArchive:
    return torch_bridge.archive_from_exported_program(corpus.get_program(name).ep)


def _payload(archive: m.OpwireArchive, codec: str) -> bytes:
    return thrift.encode(archive, codec, framed=False)  # type: ignore[arg-type]


def _program_field(data: bytes, codec: str) -> tuple[Any, int]:
    """A reader standing at the value of the archive's first field (the program), and that field's wire type."""
    r: Any = BinaryReader(data, 0) if codec == "binary" else CompactReader(data, 0)
    r.struct_begin()
    wire, fid = r.field_begin()
    assert (wire, fid) == (STRUCT, 10)
    return r, wire


def test_the_c_skip_is_built_and_steps_over_a_program() -> None:
    """Where the tests run the C module is built, and it answers for a real program: it is not always declining."""
    assert tables._c_skip is not None and tables._c_tensor is not None  # built, and not before these existed
    for codec in CODECS:
        data = _payload(_archive("mlp/decomposed"), codec)
        r, wire = _program_field(data, codec)
        done = tables._c_skip(data, r.pos, codec == "compact", wire, 1, framing.MAX_DEPTH, 10**9)
        assert done is not None
        dec = _Decoder(r, framing.MAX_DEPTH, "", 10**9)
        run_frames(dec.skip(wire, (), 1))
        assert done == (r.pos, 10**9 - dec.elements)


@pytest.mark.xdist_group("corpus_export")  # live corpus programs: exported by one worker, not by each
@pytest.mark.parametrize("codec", CODECS)
def test_every_corpus_archive_scans_the_same_with_and_without_the_c_skip(codec: str) -> None:
    for prog in corpus.programs():
        data = _payload(torch_bridge.archive_from_exported_program(prog.ep), codec)
        found = _same_scan(data, codec)
        assert isinstance(found, dict), (prog.name, found)
        for budget in (0, 10, 1000):  # the budget runs out in the program, in the tables, or not at all
            _same_scan(data, codec, max_elements=budget)
        for depth in (1, 2, 4):
            _same_scan(data, codec, max_depth=depth)


@st.composite
def _archives(draw: st.DrawFn) -> tuple[str, bytes]:
    codec = draw(st.sampled_from(CODECS))
    data = _payload(draw(strategy_for("OpwireArchive")), codec)
    if draw(st.booleans()):
        data = mutate_bytes(data, draw, _SPLICES, 300)
    return codec, data


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(case=_archives(), budget=_BUDGETS, depth=_DEPTHS)
def test_drawn_and_mutated_archives_scan_the_same(case: tuple[str, bytes], budget: int, depth: int) -> None:
    codec, data = case
    _same_scan(data, codec, budget, depth)


@pytest.fixture(scope="module")
def corpus_payloads() -> dict[str, bytes]:
    archive = _archive("mlp/training")
    return {codec: _payload(archive, codec) for codec in CODECS}


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(codec=st.sampled_from(CODECS), data=st.data(), budget=_BUDGETS)
def test_a_mutated_corpus_archive_scans_the_same(
    corpus_payloads: dict[str, bytes], codec: str, data: st.DataObject, budget: int
) -> None:
    mutated = mutate_bytes(corpus_payloads[codec], data.draw, _SPLICES, 300)
    _same_scan(mutated, codec, budget)


@pytest.mark.parametrize("codec", CODECS)
def test_hostile_lengths_truncations_and_nesting_scan_the_same(codec: str, corpus_payloads: dict[str, bytes]) -> None:
    data = corpus_payloads[codec]
    for cut in range(0, len(data), max(1, len(data) // 150)):
        assert isinstance(_same_scan(data[:cut], codec), tuple)  # every truncation is an error, worded alike
    huge = b"\x7f\xff\xff\xff" if codec == "binary" else b"\xff\xff\xff\xff\x07"
    negative = b"\xff\xff\xff\xff" if codec == "binary" else b"\xff\xff\xff\xff\x7f"
    for pos in range(0, len(data), max(1, len(data) // 150)):
        for bad in (huge, negative):
            _same_scan(data[:pos] + bad + data[pos + len(bad) :], codec)
    # an unknown field nesting lists far past max_depth and the C skip's own recursion bound
    opened = b"\x0f\x00\x05" + b"\x0f\x00\x00\x00\x01" * 100_000 if codec == "binary" else b"\x09" + b"\x19" * 100_000
    found = _same_scan(opened, codec)
    assert isinstance(found, tuple) and "nesting deeper than max_depth=192" in found[0]
    deep = _same_scan(opened, codec, max_depth=2**63 - 1)  # the writer's scan: no depth bound, the bytes run out
    assert isinstance(deep, tuple) and "remain" in deep[0]


def _python_skip(data: bytes, codec: str, wire: int, max_depth: int, budget: int) -> tuple[int, int] | None:
    """(end, values charged) of the checking decoder's `skip` from `data[0:]`, or None where it raises."""
    r: Any = BinaryReader(data, 0) if codec == "binary" else CompactReader(data, 0)
    dec = _Decoder(r, max_depth, "", budget)
    try:
        run_frames(dec.skip(wire, (), 0))
    except (Located, WireError):
        return None
    return r.pos, budget - dec.elements


def _c_skip(data: bytes, codec: str, wire: int, max_depth: int, budget: int) -> tuple[int, int] | None:
    done: tuple[int, int] | None = tables._c_skip(data, 0, codec == "compact", wire, 0, max_depth, budget)
    return done


@st.composite
def _values(draw: st.DrawFn) -> tuple[str, int, bytes]:
    """(codec, wire type, bytes): a drawn model's encoding, mutated or not, or a few arbitrary bytes read as any
    container."""
    codec = draw(st.sampled_from(CODECS))
    if draw(st.integers(0, 3)) == 0:
        return codec, draw(st.sampled_from([STRUCT, LIST, SET, MAP])), draw(st.binary(max_size=40))
    data = fast.encode(draw(strategy_for(draw(st.sampled_from(MODEL_NAMES)))), codec)
    return codec, STRUCT, mutate_bytes(data, draw, _SPLICES, 300) if draw(st.booleans()) else data


@settings(max_examples=500, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(case=_values(), budget=_BUDGETS, depth=_DEPTHS)
def test_the_c_skip_is_the_checking_decoders_skip(case: tuple[str, int, bytes], budget: int, depth: int) -> None:
    """Within its recursion bound (200, past every max_depth here), the C skip reads what the checking decoder's
    `skip` reads and charges what it charges, and declines exactly where that raises."""
    codec, wire, data = case
    assert _c_skip(data, codec, wire, depth, budget) == _python_skip(data, codec, wire, depth, budget)


def _python_tensor(data: bytes, codec: str, max_depth: int, budget: int) -> tuple[int, ...] | None:
    """(end, values charged, *the Entry) of the scan's Python walk of one TensorValue, or None where it raises."""
    r: Any = BinaryReader(data, 0) if codec == "binary" else CompactReader(data, 0)
    dec = _Decoder(r, max_depth, "", budget)
    try:
        entry = tables._scan_tensor(r, dec, "weights['w']", tables._walk)
    except (Located, WireError):
        return None
    return r.pos, budget - dec.elements, *entry


@st.composite
def _tensors(draw: st.DrawFn) -> tuple[str, bytes]:
    """A TensorValue's encoding (with a padding or not), mutated or not: fields repeated, cut, flipped, spliced."""
    codec = draw(st.sampled_from(CODECS))
    tv = draw(strategy_for("TensorValue"))
    padding = draw(st.none() | st.binary(max_size=63))
    data = fast.encode(tv.model_copy(update={"padding": padding}), codec)
    if draw(st.booleans()):
        data = mutate_bytes(data, draw, [*_SPLICES, data[: len(data) // 2]], 300)
    return codec, data


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(case=_tensors(), budget=_BUDGETS, depth=_DEPTHS)
def test_the_c_tensor_scan_is_the_python_one(case: tuple[str, bytes], budget: int, depth: int) -> None:
    """`thrift_tensor` notes the positions `_scan_tensor` notes, reads and charges what it does, and declines exactly
    where it raises (a field twice included)."""
    codec, data = case
    ours = tables._c_tensor(data, 0, codec == "compact", depth, budget)
    assert ours == _python_tensor(data, codec, depth, budget)


@pytest.mark.parametrize("codec", CODECS)
def test_a_tensor_with_its_data_twice_is_declined_by_the_c_scan(codec: str) -> None:
    device = m.Device(type="cpu", index=None)
    tv = m.TensorValue(
        dtype=m.ScalarType.FLOAT,
        sizes=[1],
        strides=[1],
        storage_offset=0,
        device=device,
        requires_grad=False,
        data=b"\0" * 4,
    )
    tv = tv.model_copy(update={"padding": b"\0"})
    data = fast.encode(tv, codec)
    found = _python_tensor(data, codec, framing.MAX_DEPTH, 10**9)
    assert found is not None and found[2] >= 0 and found[5] >= 0  # the data and the padding were found
    assert tables._c_tensor(data, 0, codec == "compact", framing.MAX_DEPTH, 10**9) == found
    header = b"\x0b\x00\x46" if codec == "binary" else b"\x08\x8c\x01"  # a string, id 70 (compact: long form)
    end = found[3] + found[4]
    twice = data[:end] + header + data[found[2] : end] + data[end:]
    assert _python_tensor(twice, codec, framing.MAX_DEPTH, 10**9) is None
    assert tables._c_tensor(twice, 0, codec == "compact", framing.MAX_DEPTH, 10**9) is None


@pytest.fixture(scope="module")
def child() -> Iterator[Child]:
    yield from child_fixture("archive scan")


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(case=_archives())
def test_mutated_archives_scan_alike_in_a_child(child: Child, case: tuple[str, bytes]) -> None:
    """The same comparison in the fuzz child (under RLIMIT_AS): a crash or a runaway in the C walk fails the test
    instead of killing the suite."""
    codec, data = case
    result = child.decode(codec, "OpwireArchive", data, "scan")
    assert result["status"] in ("ok", "decode_error"), result["detail"]


@pytest.mark.parametrize("codec", CODECS)
def test_hostile_archives_scan_alike_in_a_child(child: Child, codec: str, corpus_payloads: dict[str, bytes]) -> None:
    data = corpus_payloads[codec]
    huge = b"\x7f\xff\xff\xff" if codec == "binary" else b"\xff\xff\xff\xff\x07"
    deep = b"\x0f\x00\x05" + b"\x0f\x00\x00\x00\x01" * 200_000 if codec == "binary" else b"\x09" + b"\x19" * 1_000_000
    for case in (deep, data[: len(data) // 2]):
        result = child.decode(codec, "OpwireArchive", case, "scan")
        assert result["status"] == "decode_error", result["detail"]
    for pos in range(0, len(data), max(1, len(data) // 100)):  # inside a string, a length may still fit
        result = child.decode(codec, "OpwireArchive", data[:pos] + huge + data[pos + len(huge) :], "scan")
        assert result["status"] in ("ok", "decode_error"), result["detail"]
