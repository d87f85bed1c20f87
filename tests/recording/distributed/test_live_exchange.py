"""The outcome exchange of `--collectives` replay through a key-value store, without torchrun (one process)."""

from __future__ import annotations

from datetime import timedelta

import pytest
import torch.distributed as dist

from opwire.recording.distributed.live import _GLOO_PLACE, _outcome
from opwire.recording.distributed.live_exchange import Exchange


@pytest.fixture
def store() -> dist.Store:
    return dist.TCPStore("127.0.0.1", 0, is_master=True, timeout=timedelta(seconds=5), wait_for_workers=False)  # type: ignore[attr-defined]


def test_rank_0_collects_what_the_others_published(store: dist.Store) -> None:
    rank0, rank1 = Exchange(store, "opwire-replay/job/0/", 3), Exchange(store, "opwire-replay/job/0/", 3)
    assert rank1.publish(1, {"error": "RuntimeError: Timed out", "at": [35, "c10d::barrier.default"]})
    got = rank0.collect(timeout=0.3)  # rank 2 never published: no word from it, after the wait
    assert got == {1: {"error": "RuntimeError: Timed out", "at": [35, "c10d::barrier.default"]}, 2: None}
    assert Exchange(store, "opwire-replay/other-job/0/", 3).collect(timeout=0.1) == {1: None, 2: None}


def test_outside_torchrun_there_is_no_exchange(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TORCHELASTIC_USE_AGENT_STORE", raising=False)
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    assert Exchange.connect(2, 1.0) is None


def test_an_outcome_keeps_the_error_and_the_call_and_drops_gloos_source_path() -> None:
    raw = "[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting 4000ms"
    assert _GLOO_PLACE.sub("", raw) == "Timed out waiting 4000ms"
    assert _GLOO_PLACE.sub("", "[rank 1] stays") == "[rank 1] stays"
    got = _outcome({"error": b"RuntimeError: boom\x1b[31m", "at": b'[3, "aten::add.Tensor"]'})
    assert (
        got["at"] == [3, "aten::add.Tensor"]
        and got["error"].startswith("RuntimeError: boom")
        and "\x1b" not in got["error"]
    )
