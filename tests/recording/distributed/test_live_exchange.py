"""The outcome exchange of `--collectives` replay through a key-value store, without torchrun (one process)."""

from __future__ import annotations

import os
import subprocess
import time
from datetime import timedelta

import pytest
import torch.distributed as dist

from opwire.recording.distributed.live import _GLOO_PLACE, _outcome
from opwire.recording.distributed.live_exchange import Exchange, _running_sibling


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


class _Store:
    """The two store calls `wait_gone` makes, over a dict (no torch in the forked child)."""

    def __init__(self, data: dict[str, bytes]) -> None:
        self.data = data

    def check(self, keys: list[str]) -> bool:
        return all(k in self.data for k in keys)

    def get(self, key: str) -> bytes:
        return self.data[key]


def test_rank_0_waits_until_the_ranks_beside_it_have_exited() -> None:
    """Rank 0 exits only once its sibling ranks (same parent: the agent) have, so torchrun stops none of them."""
    sibling = subprocess.Popen(["sleep", "0.6"])
    stranger = os.getpid()  # alive, but not a sibling of the forked "rank 0" below: not waited for
    pid = os.fork()
    if pid == 0:  # "rank 0": a sibling of `sibling`, both children of this test process (the agent)
        ok = _running_sibling(sibling.pid) and not _running_sibling(stranger)
        store = _Store({"p/pid/1": str(sibling.pid).encode(), "p/pid/2": str(stranger).encode()})
        Exchange(store, "p/", 4).wait_gone(timeout=30)  # rank 3 left no pid: nothing to wait for
        os._exit(0 if ok and not _running_sibling(sibling.pid) else 1)
    start = time.monotonic()
    sibling.wait()  # reaped only now: the forked rank 0 saw it as a zombie (exited) or gone
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0 and time.monotonic() - start < 20


def test_the_wait_is_bounded() -> None:
    sibling = subprocess.Popen(["sleep", "30"])
    pid = os.fork()
    if pid == 0:
        start = time.monotonic()
        Exchange(_Store({"p/pid/1": str(sibling.pid).encode()}), "p/", 2).wait_gone(timeout=0.3)
        os._exit(0 if 0.3 <= time.monotonic() - start < 10 and _running_sibling(sibling.pid) else 1)
    _, status = os.waitpid(pid, 0)
    sibling.kill()
    sibling.wait()
    assert os.waitstatus_to_exitcode(status) == 0
