"""Fuzz the JSON decoder: mutated valid documents either decode to a valid model or raise DecodeError, within
bounded time and memory (decoded in a child process under RLIMIT_AS, as the Thrift fuzz test does)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import corpus
from support.fuzz_child import Child, child_fixture
from support.typed import strategy_for

import opwire

EXAMPLES = int(os.environ.get("OPWIRE_FUZZ_EXAMPLES", "600"))
ROOTS = ("ExportedProgram", "Graph", "Node", "Argument", "Value", "CallTrace", "ExternKernelNodes", "OpwireArchive")
_TOKENS = [b"{", b"}", b"[", b"]", b",", b":", b'"', b"null", b"true", b"1e999", b"-0", b"NaN", b"\\u0000", b"\xff"]


@pytest.fixture(scope="module")
def child() -> Iterator[Child]:
    yield from child_fixture("JSON")


@st.composite
def _mutated(draw: st.DrawFn) -> tuple[str, bytes]:
    root = draw(st.sampled_from(ROOTS))
    data = opwire.dumps(draw(strategy_for(root)))
    for _ in range(draw(st.integers(1, 3))):
        pos = draw(st.integers(0, max(len(data) - 1, 0)))
        kind = draw(st.sampled_from(("truncate", "flip", "token", "delete", "nest", "duplicate")))
        if kind == "truncate":
            data = data[:pos]
        elif kind == "flip" and data:
            data = data[:pos] + bytes([data[pos] ^ draw(st.integers(1, 255))]) + data[pos + 1 :]
        elif kind == "token":
            data = data[:pos] + draw(st.sampled_from(_TOKENS)) + data[pos:]
        elif kind == "delete":
            data = data[:pos] + data[pos + draw(st.integers(1, 8)) :]
        elif kind == "nest":
            n = draw(st.integers(50, 20_000))
            data = data[:pos] + b'{"as_list": [' * n + data[pos:]
        else:
            size = draw(st.integers(1, 64))
            data = data[:pos] + data[pos : pos + size] * draw(st.integers(2, 50)) + data[pos:]
    return root, data


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(case=_mutated())
def test_mutated_json_decodes_or_raises_decode_error(child: Child, case: tuple[str, bytes]) -> None:
    root, data = case
    result = child.decode("json", root, data)
    assert result["status"] in ("ok", "decode_error"), result["detail"]


def test_mutated_corpus_programs(child: Child) -> None:
    """Every cut of a real program is a DecodeError, never anything else."""
    data = corpus.get_serialized("cond/training").json_bytes
    for cut in range(1, len(data), max(1, len(data) // 200)):
        assert child.decode("json", "ExportedProgram", data[:cut])["status"] == "decode_error"
    assert child.decode("json", "ExportedProgram", data)["status"] == "ok"
