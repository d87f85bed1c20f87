"""Fuzz the Thrift decoders: mutated valid encodings either decode to a valid model or raise DecodeError,
within bounded time and memory. Decoding happens in a child process under RLIMIT_AS, so a segfault or a
runaway allocation fails this test instead of killing the suite. `make fuzz` runs atheris for longer."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.fuzz_child import Child, child_fixture
from support.typed import strategy_for

from opwire.schema import models as m
from opwire.serde import framing, thrift

EXAMPLES = int(os.environ.get("OPWIRE_FUZZ_EXAMPLES", "1200"))
ROOTS = ("ExportedProgram", "Graph", "Node", "Argument", "Value", "Values", "CallTrace", "ExternKernelNodes")


@pytest.fixture(scope="module")
def child() -> Iterator[Child]:
    yield from child_fixture("Thrift")


def _inflate(data: bytes, pos: int, codec: str) -> bytes:
    """Overwrite what may be a length prefix at `pos` with a huge length."""
    big = b"\x7f\xff\xff\xff" if codec == "binary" else b"\xff\xff\xff\xff\x07"
    return data[:pos] + big + data[pos + len(big) :]


def _nest(data: bytes, pos: int, size: int, times: int) -> bytes:
    """Repeat a slice many times: deep nesting when the slice opens a struct, list or map."""
    return data[:pos] + data[pos : pos + size] * times + data[pos:]


@st.composite
def _mutated(draw: st.DrawFn) -> tuple[str, str, bytes]:
    root = draw(st.sampled_from(ROOTS))
    codec = draw(st.sampled_from(sorted(framing.CODECS)))
    framed = draw(st.booleans())
    data = thrift.encode(draw(strategy_for(root)), codec, framed=framed)  # type: ignore[arg-type]
    for _ in range(draw(st.integers(1, 3))):
        n = len(data)
        pos = draw(st.integers(0, max(n - 1, 0)))
        kind = draw(st.sampled_from(("truncate", "flip", "splice", "inflate", "nest", "append", "delete")))
        if kind == "truncate":
            data = data[:pos]
        elif kind == "flip":
            data = data[:pos] + bytes([data[pos] ^ draw(st.integers(1, 255))]) + data[pos + 1 :] if n else data
        elif kind == "splice":
            data = data[:pos] + draw(st.binary(min_size=1, max_size=16)) + data[pos:]
        elif kind == "inflate":
            data = _inflate(data, pos, codec)
        elif kind == "nest":
            data = _nest(data, pos, draw(st.integers(1, 6)), draw(st.integers(50, 5000)))
        elif kind == "append":
            data = data + draw(st.binary(min_size=1, max_size=8))
        else:
            data = data[:pos] + data[pos + draw(st.integers(1, 8)) :]
    return codec, root, data


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(case=_mutated())
def test_mutated_encodings_decode_or_raise_decode_error(child: Child, case: tuple[str, str, bytes]) -> None:
    """Every engine in turn, as `opwire.loads` reads: fastbinary first, the checking decoder on what it declines."""
    codec, root, data = case
    result = child.decode(codec, root, data)
    assert result["status"] in ("ok", "decode_error"), result["detail"]


def test_hostile_classics(child: Child, codec: str, engine: str) -> None:
    """The cases that break thriftpy2, plus deep nesting in an unknown field (fastbinary's C recursion): each engine
    alone refuses each, quickly."""
    string_len = b"\x0b\x00\x0a\x7f\xff\xff\xff" if codec == "binary" else b"\xa8\xff\xff\xff\xff\x07"
    list_len = b"\x0f\x00\x0a\x0c\x7f\xff\xff\xff" if codec == "binary" else b"\xa9\xfc\xff\xff\xff\xff\x07"
    map_len = b"\x0d\x00\x0a\x0b\x0c\x7f\xff\xff\xff" if codec == "binary" else b"\xab\xff\xff\xff\xff\x07\x8c"
    deep_unknown = (b"\x0f\x00\x01" + b"\x0f\x00\x00\x00\x01" * 200_000) if codec == "binary" else b"\x19" * 1_000_000
    cases = [
        ("TensorArgument", b""),
        ("TensorArgument", string_len),
        ("ExternKernelNodes", list_len),
        ("Values", map_len),
        ("TensorArgument", deep_unknown),
        ("Value", (b"\x0f\x00\x78\x0c\x00\x00\x00\x01" if codec == "binary" else b"\x09\xf0\x01\x1c") * 100_000),
    ]
    if codec == "compact":
        cases.append(("SymIntArgument", b"\x06\x28" + b"\xff" * 2_000_000))
    for root, data in cases:
        result = child.decode(codec, root, data, engine)
        assert result["status"] == "decode_error", (root, result)
        assert float(result["seconds"]) < 5, (root, result)  # type: ignore[arg-type]


def test_valid_program_survives_the_child(child: Child) -> None:
    node = m.Node(target="aten::neg", inputs=[], outputs=[], metadata={"k": "v"})
    graph = m.Graph(inputs=[], outputs=[], nodes=[node] * 50, tensor_values={}, sym_int_values={}, sym_bool_values={})
    assert child.decode("compact", "Graph", thrift.encode(graph, "compact"))["status"] == "ok"
