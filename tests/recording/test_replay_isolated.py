"""`opwire.replay(..., isolate=True)` over a streamed trace: each source says which open files it reads from
(`TraceSource.descriptors()`), and the sandboxed child keeps exactly those (recording/replay_isolated.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

import opwire
from opwire.recording.distributed.run_replay import _LocalOnly
from opwire.recording.frames import ScanSource
from opwire.recording.source import ModelSource, StreamSource, TraceSource

pytestmark = pytest.mark.xdist_group("isolation_api")


def _streamed(path: Path) -> Path:
    x = torch.randn(4, 4)
    with opwire.record(path=path):
        torch.relu(x @ x).sum()
    return path


def test_each_source_names_the_files_it_reads(tmp_path: Path) -> None:
    path = _streamed(tmp_path / "t.trace")
    for src in (StreamSource(path), ScanSource(path)):
        (fd,) = src.descriptors()
        assert os.path.samefile(f"/proc/self/fd/{fd}", path)
        assert _LocalOnly(src).descriptors() == [fd]  # a wrapper asks what it wraps
        src.close()
        assert src.descriptors() == []  # a closed file is no descriptor to keep
    assert ModelSource(opwire.load_trace(path).model).descriptors() == []


def test_a_source_that_does_not_say_is_an_error() -> None:
    """No attribute walk guesses the files: a source that does not implement `descriptors` fails loudly."""

    class Quiet(TraceSource):
        pass

    with pytest.raises(NotImplementedError):
        Quiet().descriptors()


def test_an_isolated_replay_of_a_streamed_trace_reads_it_in_the_child(tmp_path: Path) -> None:
    path = _streamed(tmp_path / "t.trace")
    inside, outside = opwire.replay(path, isolate=True, progress=False), opwire.replay(path, progress=False)
    assert inside.ok and outside.ok and inside.replayed == outside.replayed == outside.calls > 0
