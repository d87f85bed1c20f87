"""A streamed trace holds the bytes it hashed, even when the program writes the memory while the writer reads it.

DDP's reducer writes gradient buckets through raw pointers from its own thread: no dispatch mode sees it. The
trace writer hashes payloads on its thread while the program runs on, so such a write can land between hashing
a payload and writing it; the file then disagreed with its own SHA-256 and replay called a fresh recording
corrupt. The race is made deterministic here: a stand-in for `hashlib` writes the tensor's memory right after
the payload is hashed, as the reducer did.
"""

from __future__ import annotations

import ctypes
import hashlib
from pathlib import Path
from typing import Any

import pytest
import torch

import opwire
from opwire.cli import main
from opwire.errors import DecodeError
from opwire.recording import stream_writer
from opwire.recording.stream_reader import TraceReader


class _RacingHashlib:
    """`hashlib` whose sha256, once it has hashed the start of `victim`'s bytes, zeroes `victim`'s memory."""

    def __init__(self, victim: torch.Tensor) -> None:
        self.victim, self.raced = victim, False
        self.original = victim.numpy().tobytes()

    def sha256(self, data: Any = b"") -> _Hash:
        h = _Hash(self)
        h.update(data)
        return h

    def seen(self, data: Any) -> None:
        chunk = bytes(data)
        if not self.raced and chunk and chunk == self.original[: len(chunk)]:
            self.raced = True
            ctypes.memset(self.victim.data_ptr(), 0, len(self.original))  # as DDP's reducer writes: no mode sees it


class _Hash:
    def __init__(self, racing: _RacingHashlib) -> None:
        self.racing, self.h = racing, hashlib.sha256()

    def update(self, data: Any) -> None:
        self.h.update(data)
        self.racing.seen(data)

    def digest(self) -> bytes:
        return self.h.digest()

    def hexdigest(self) -> str:
        return self.h.hexdigest()


def _record_racing(path: Path, monkeypatch: pytest.MonkeyPatch, numel: int) -> torch.Tensor:
    """Record a read of a tensor whose memory is zeroed right after the writer hashed (the start of) its payload."""
    bucket = torch.arange(numel, dtype=torch.float32) + 1
    racing = _RacingHashlib(bucket)
    with monkeypatch.context() as patch:
        patch.setattr(stream_writer, "hashlib", racing)
        with opwire.record(path=path):
            bucket.sum()
    assert racing.raced
    hashed = (torch.arange(numel, dtype=torch.float32) + 1).view(torch.uint8)
    hashed[stream_writer.SNAPSHOT_BYTES :] = 0  # a chunked payload: the chunks after the first were hashed zeroed
    return hashed.view(torch.float32)


@pytest.mark.parametrize("numel", [64, (stream_writer.SNAPSHOT_BYTES // 4) + 3], ids=["snapshot", "chunked"])
def test_a_payload_written_while_it_is_hashed_is_stored_as_hashed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, numel: int
) -> None:
    path = tmp_path / "race.trace"
    hashed = _record_racing(path, monkeypatch, numel)
    trace = opwire.load_trace(path)
    (name,) = [a.arg.value.name for a in trace.records[0].inputs if a.arg.type == "as_tensor"]
    assert torch.equal(trace.tensor(name), hashed)  # the bytes it hashed, read back without a digest error
    with TraceReader(path) as reader:
        assert reader.verify() == (2, 1)  # the input and sum's output; one record


def test_inspect_verify_checks_every_payload_of_a_streamed_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s.trace"
    with opwire.record(path=path):
        (torch.arange(16, dtype=torch.float32) * 3).tanh()
    assert main(["inspect", str(path), "--verify"]) == 0
    assert "every payload's SHA-256 (" in capsys.readouterr().out
    data = bytearray(path.read_bytes())
    at = data.find((torch.arange(16, dtype=torch.float32) * 3).numpy().tobytes())
    assert at > 0
    data[at + 5] ^= 0xFF
    (tmp_path / "bad.trace").write_bytes(bytes(data))
    assert main(["inspect", str(tmp_path / "bad.trace"), "--verify"]) == 2
    err = capsys.readouterr().err
    assert f"the payload at byte {at} (64 bytes) does not match its SHA-256" in err and "the file is corrupt" in err
    with TraceReader(tmp_path / "bad.trace") as reader, pytest.raises(DecodeError, match="tensors t2 read it"):
        reader.verify()
