"""The `mutated` metadata of a recorded call is read back checked: a trace is a file someone else may write."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import opwire
from opwire.errors import DecodeError
from opwire.recording.mutations import MUTATED, written_arguments


def _recorded_add_(path: Path) -> opwire.Trace:
    with opwire.record() as trace:
        x = torch.ones(3)
        x.add_(1)
    trace.save(path)
    return trace


def test_an_in_place_call_names_the_argument_it_wrote(tmp_path: Path) -> None:
    trace = _recorded_add_(tmp_path / "ok.trace")
    (rec,) = [r for r in trace.records if MUTATED in r.metadata]
    assert written_arguments(rec, "call") == {"self": [rec.outputs[0].as_tensor.name]}  # type: ignore[union-attr]
    assert opwire.replay(tmp_path / "ok.trace", progress=False).ok


@pytest.mark.parametrize("bad", ["garbage", "[1, 2]", '{"self": 5}', '{"self": [1]}', "[" * 5000])
def test_a_bad_mutated_entry_is_a_decode_error_naming_the_call(tmp_path: Path, bad: str) -> None:
    trace = _recorded_add_(tmp_path / "ok.trace")
    for rec in trace.records:
        if MUTATED in rec.metadata:
            rec.metadata[MUTATED] = bad
    trace.save(tmp_path / "bad.trace")
    with pytest.raises(DecodeError, match=r"call \d+ aten::add_\.Tensor: metadata 'mutated' should be a JSON object"):
        opwire.replay(tmp_path / "bad.trace", progress=False)
