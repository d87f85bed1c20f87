"""Memory the program manages where no dispatch mode sees, and tensor subclasses that run their own ops.

FSDP2 frees its unsharded parameters with `untyped_storage().resize_(0)` after each forward and re-allocates
them before the next all-gather; it wraps a view of that memory in an `nn.Parameter`, an alias no recorded call
made. DTensor runs each op on its local shard below the recorder's mode, and its sharding rules run ops on fake
tensors. These tests make the same moves on one process, with a stand-in subclass for DTensor.
"""

from __future__ import annotations

import ctypes
import json
from pathlib import Path

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.testing._internal.two_tensor import TwoTensor

import opwire
from opwire.recording.aliases import AliasGroups
from opwire.recording.definedness import EXTERNAL, UNDEFINED
from opwire.recording.storages import Addresses, storage_key
from opwire.schema import models as m
from opwire.schema.refs import tensor_names


def _calls(trace: opwire.Trace) -> list[tuple[str, list[str], list[str], dict[str, list[str]]]]:
    out = []
    for r in trace.records:
        ins = [n for na in r.inputs for n in tensor_names(na.arg)]
        outs = [n for a in r.outputs for n in tensor_names(a)]
        marks = {k: json.loads(r.metadata[k]) for k in (UNDEFINED, EXTERNAL) if k in r.metadata}
        out.append((r.target, ins, outs, marks))
    return out


@pytest.fixture(scope="module")
def resized() -> opwire.Trace:
    with opwire.record() as trace:
        full = torch.arange(16.0)
        buf = torch.empty(16)
        buf.copy_(full)
        before = buf.view(4, 4) * 1
        storage = buf.untyped_storage()
        storage.resize_(0)  # freed, as FSDP2 reshards after a forward
        storage.resize_(64)  # new memory, as FSDP2 unshards before the next all-gather
        view = buf.view(4, 4)
        view.copy_(full.view(4, 4))
        after = buf * 2
        del before, view, after
    return trace


def test_storage_reallocated_outside_the_dispatcher_is_undefined_until_written(resized: opwire.Trace) -> None:
    calls = _calls(resized)
    views = [c for c in calls if c[0] == "aten::view.default" and c[1][0].startswith("t2")]
    (_, first_in, _, first_marks), (_, second_in, second_out, second_marks) = views
    assert first_marks == {}  # written by copy_: defined
    # the same tensor object, read again after the re-allocation: a new value, undefined like an `empty`'s
    assert second_in != first_in and second_marks == {UNDEFINED: second_out}
    target, _, _, marks = calls[-1]
    assert target == "aten::mul.Tensor" and marks == {}  # every byte written again from defined values


@pytest.mark.parametrize("mode", ["isolated", "chained"])
def test_a_reallocated_storage_replays_clean(resized: opwire.Trace, mode: str) -> None:
    report = opwire.replay(resized, mode=mode)
    assert report.ok, str(report)


def test_diff_never_compares_the_new_memory() -> None:
    def run(fill: int) -> opwire.Trace:
        with opwire.record() as trace:
            buf = torch.zeros(8)
            storage = buf.untyped_storage()
            storage.resize_(0)
            storage.resize_(64)
            ctypes.memset(buf.data_ptr(), fill, 32)  # a different leftover in each run, written unseen
            garbage = buf * 1
            buf.copy_(torch.ones(8))
            result = buf * 3
            del garbage, result
        return trace

    diff = opwire.diff_traces(run(0x41), run(0x42))  # floats 12.1 and 48.6
    assert diff.ok, str(diff)


def test_a_write_through_an_alias_the_replay_cannot_know_is_taken_from_the_recording() -> None:
    with opwire.record() as trace:
        base = torch.zeros(4)
        param = torch.nn.Parameter(base)  # an alias no recorded call made, as FSDP2's unsharded parameter
        first = param * 2
        base.add_(1)  # written through the other tensor object
        second = param * 2
        del first, second
    calls = _calls(trace)
    (_, (early,), _, _), (_, (late,), _, marks) = [c for c in calls if c[0] == "aten::mul.Tensor"]
    assert late != early and marks == {EXTERNAL: [late]}
    report = opwire.replay(trace, mode="chained")
    assert report.ok, str(report)


def test_a_wrapper_subclass_is_recorded_as_the_calls_it_makes_on_plain_tensors() -> None:
    with opwire.record() as trace:
        pair = TwoTensor(torch.ones(2), torch.zeros(2)) * 3
        with FakeTensorMode():  # DTensor's sharding rules: no values, nothing to record
            fake = torch.ones(3) + 1
        del pair, fake
    targets = [r.target for r in trace.records]
    assert targets == ["aten::ones.default", "aten::zeros.default", "aten::mul.Tensor", "aten::mul.Tensor"]
    assert not [r for r in trace.records if "skipped" in r.metadata]
    assert all(isinstance(v, m.TensorValue) for v in trace.tensors.values())


def test_addresses_follow_a_storage_through_its_resizes_and_forget_it_with_its_last_tensor() -> None:
    addresses = Addresses()
    t = torch.zeros(4)
    key = storage_key(t)
    view = t[1:]
    assert storage_key(view) == key  # one storage, whatever the view
    addresses.hold(key, t)
    addresses.hold(key, view)
    assert not addresses.moved(key, t) and not addresses.managed(key)
    t.untyped_storage().resize_(0)
    assert not addresses.moved(key, t)  # no memory now: nothing to read
    t.untyped_storage().resize_(16)
    assert addresses.moved(key, t) and not addresses.moved(key, view)  # seen once, then where it is
    assert addresses.managed(key)  # memory the program manages itself from now on
    addresses.release(key)
    assert addresses.managed(key)
    addresses.release(key)
    assert not addresses.managed(key) and not addresses.moved(key, t)  # forgotten with its last tensor


def test_alias_groups_see_the_writes_made_through_their_own_members_only() -> None:
    groups = AliasGroups()
    groups.start_call()
    base = groups.join(1, key=7, produced=False)
    groups.named(base, 7, 0, produced=False)
    view = groups.join(2, key=7, produced=True)  # a result on its input's storage: a view in the replay too
    groups.named(view, 7, 0, produced=True)
    other = groups.join(3, key=7, produced=False)  # first met as an input: rebuilt on its own
    groups.named(other, 7, 0, produced=False)
    assert view == base and other != base
    groups.named(view, 7, 1, produced=True)  # written through the view
    assert not groups.missed(base, 7, 1) and groups.missed(other, 7, 1)
    groups.leave(other)
    assert not groups.missed(other, 7, 2)  # a group forgotten with its last member


def test_a_payload_is_the_bytes_at_the_call_even_when_the_memory_is_freed_right_after(tmp_path: Path) -> None:
    """The writer thread is kept busy (a large payload queued first) while the program frees the memory of a
    small result outside the dispatcher, as FSDP2's reshard does: the trace still holds the result's bytes,
    taken on the recording thread (they once read back as whatever the freed memory held, e.g. 2.3e38)."""
    path = tmp_path / "freed.trace"
    with opwire.record(path=path) as trace:
        big = torch.rand(16 << 20) + 1  # 64 MiB to hash and write before the writer reaches `small`
        small = torch.arange(4096.0) * 3
        small.untyped_storage().resize_(0)  # freed outside the dispatcher
        junk = [torch.full((1024,), 7.0) for _ in range(64)]  # new allocations take the freed memory
        del big, junk
    (rec,) = [r for r in trace.records if r.target == "aten::mul.Tensor"]
    (name,) = tensor_names(rec.outputs[0])
    assert torch.equal(trace.source.load(name, "cpu"), torch.arange(4096.0) * 3)  # not 7s
