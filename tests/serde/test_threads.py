"""Decoders share no process-wide state: 4 threads decoding while a fifth decodes input deeper than the
interpreter's stack, results checked, and `sys.getrecursionlimit()` never changes (the checking decoder is
iterative)."""

from __future__ import annotations

import sys
import threading
from typing import Any

import pytest

import opwire
from opwire.schema import models as m
from opwire.serde import DecodeError


def _nested(levels: int) -> m.Value:
    value = m.Value(as_list=[])
    for _ in range(levels):
        value = m.Value(as_list=[value])
    return value


def _deep_bytes(levels: int, fmt: str) -> bytes:
    """A compact/binary Value nesting `levels` lists, built by repetition (no deep model needed)."""
    one = opwire.dumps(m.Value(as_list=[m.Value(as_int=7)]), format=fmt)  # type: ignore[arg-type]
    zero = opwire.dumps(m.Value(as_int=7), format=fmt)  # type: ignore[arg-type]
    from opwire.serde import framing

    h = len(framing.write_header(fmt, "Value"))
    prefix, suffix = one[h:].split(zero[h:])
    return one[:h] + prefix * levels + zero[h:] + suffix * levels


def test_four_threads_and_a_deep_decode(codec: str, corpus_programs: list[Any]) -> None:
    limit = sys.getrecursionlimit()
    programs = [
        (p.json_bytes, opwire.dumps(opwire.loads(p.json_bytes, m.ExportedProgram), format=codec))
        for p in corpus_programs[:6]
    ]
    deep = _deep_bytes(3000, codec)
    errors: list[BaseException] = []
    seen_limits: set[int] = set()
    stop = threading.Event()

    def work() -> None:
        try:
            for _ in range(3):
                for json_bytes, data in programs:
                    obj = opwire.loads(data, m.ExportedProgram, format=codec)  # type: ignore[arg-type]
                    assert opwire.dumps(obj) == json_bytes
                    seen_limits.add(sys.getrecursionlimit())
        except BaseException as exc:  # reported below
            errors.append(exc)

    def deep_decode() -> None:
        try:
            while not stop.is_set():
                value = opwire.loads(deep, m.Value, format=codec, max_depth=100_000)  # type: ignore[arg-type]
                assert value.as_list is not None
                with pytest.raises(DecodeError, match="nesting deeper than max_depth=5000"):
                    opwire.loads(deep, m.Value, format=codec, max_depth=5000)  # type: ignore[arg-type]
                seen_limits.add(sys.getrecursionlimit())
        except BaseException as exc:
            errors.append(exc)

    workers = [threading.Thread(target=work) for _ in range(4)]
    deep_thread = threading.Thread(target=deep_decode)
    deep_thread.start()
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    stop.set()
    deep_thread.join()
    assert not errors, errors[0]
    assert seen_limits == {limit}
    assert sys.getrecursionlimit() == limit


def test_deep_input_within_the_stack_still_decodes(codec: str) -> None:
    value = _nested(100)
    data = opwire.dumps(value, format=codec)  # type: ignore[arg-type]
    limit = sys.getrecursionlimit()
    assert opwire.loads(data, m.Value, format=codec, max_depth=400) == value  # type: ignore[arg-type]
    assert sys.getrecursionlimit() == limit


def test_no_module_changes_the_recursion_limit() -> None:
    from pathlib import Path

    import opwire

    root = Path(opwire.__file__).parent
    offenders = [str(p) for p in root.rglob("*.py") if "setrecursionlimit" in p.read_text()]
    assert offenders == []
