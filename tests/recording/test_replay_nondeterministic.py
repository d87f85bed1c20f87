"""Chained replay continues from the recorded values of random and `empty` ops, which no replay reproduces."""

from __future__ import annotations

import torch

import opwire


def test_replay_through_module_init_and_training_step(replay_mode: str) -> None:
    torch.manual_seed(0)
    with opwire.record() as trace:
        model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU(), torch.nn.Linear(8, 2))  # empty + uniform_
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        noise = torch.randn(4, 8)
        loss = model(noise + torch.empty(4, 8).zero_()).pow(2).mean()
        loss.backward()
        opt.step()
    targets = {r.target for r in trace.records}
    assert {"aten::uniform_.default", "aten::randn.default", "aten::empty.memory_format"} <= targets
    report = opwire.replay(trace, mode=replay_mode)  # type: ignore[arg-type]
    assert report.ok, f"{replay_mode}: {report}"
    assert report.replayed == len(trace.records)


def test_chained_replay_still_catches_a_tampered_deterministic_value() -> None:
    torch.manual_seed(0)
    with opwire.record() as trace:
        x = torch.randn(3, 3)
        y = torch.tanh(x) * 2
    del y
    tanh = next(i for i, r in enumerate(trace.records) if r.target == "aten::tanh.default")
    out = trace.records[tanh].outputs[0].as_tensor
    assert out is not None
    tv = trace.model.tensors[out.name]
    tv.data = bytes(4) + tv.data[4:]  # first float32 of tanh's output becomes 0.0
    report = opwire.replay(trace, mode="chained")
    assert [(m.index, m.op, m.kind) for m in report.mismatches] == [(tanh, "aten::tanh.default", "value")]
