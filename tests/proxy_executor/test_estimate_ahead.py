"""The memory estimate run ahead on meta stand-ins (`NodePlan.estimate_ahead`, a replay's set-up): the call then
finds it kept and raises or runs exactly as it would have estimated itself."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from support.op_call import call_node

from opwire.errors import BudgetError
from opwire.proxy_executor import ProxyExecutor, checks

_OVER = r"outputs would take [\d,]+ bytes, over the execution-memory budget"


def _stand_ins(env: dict[str, Any]) -> dict[str, Any]:
    """Meta tensors of the values' layouts (what a replay builds from the recorded metadata)."""
    return {k: torch.empty_strided(v.shape, v.stride(), dtype=v.dtype, device="meta") for k, v in env.items()}


def _no_estimate(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Count the estimates run from here on."""
    ran: list[object] = []
    real = checks.output_bytes
    monkeypatch.setattr(checks, "output_bytes", lambda *a: ran.append(a) or real(*a))
    return ran


@pytest.mark.parametrize(
    ("op", "values"),
    [
        ("aten::clone", {"self": torch.ones(1).expand(2**34)}),  # 4 bytes in, 64 GiB out
        ("aten::mul.Tensor", {"self": torch.ones(2**17, 1), "other": torch.ones(1, 2**17)}),  # a broadcast
        ("aten::outer", {"self": torch.ones(2**17), "vec2": torch.ones(2**17)}),
    ],
)
def test_an_estimate_over_the_budget_is_kept_and_the_call_refused_as_before(
    op: str, values: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    node, env = call_node(op, **values)
    executor = ProxyExecutor()
    plan = executor.plan(node)
    plan.estimate_ahead(_stand_ins(env))  # nothing raised at set-up
    ran = _no_estimate(monkeypatch)
    with pytest.raises(BudgetError, match=_OVER):
        executor.call(node, env)
    assert ran == []  # the estimate kept ahead decided it
    with pytest.raises(BudgetError, match=_OVER):
        ProxyExecutor().call(node, env)  # the same refusal without it


def test_an_ordinary_call_runs_on_the_estimate_kept_ahead(monkeypatch: pytest.MonkeyPatch) -> None:
    node, env = call_node("aten::mm", self=torch.ones(64, 32), mat2=torch.ones(32, 128))
    executor = ProxyExecutor(max_memory=1 << 20)  # 32 KiB out, under it; too tight for the cheap filters to decide
    plan = executor.plan(node)
    assert plan.checks is not None and plan.checks.memory is not None
    plan.estimate_ahead(_stand_ins(env))
    ran = _no_estimate(monkeypatch)
    (out,) = executor.call(node, env).values()
    assert torch.equal(out, torch.full((64, 128), 32.0)) and ran == []  # type: ignore[arg-type]
    executor.call(node, {"self": torch.ones(8, 32), "mat2": torch.ones(32, 128)})  # other shapes: estimated then
    assert len(ran) == 1


def test_stand_ins_that_do_not_fit_the_node_leave_the_call_to_estimate_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    node, env = call_node("aten::mm", self=torch.ones(64, 32), mat2=torch.ones(32, 128))
    executor = ProxyExecutor(max_memory=1 << 20)
    plan = executor.plan(node)
    plan.estimate_ahead({})  # a value the node reads is missing: nothing raised, nothing kept
    plan.estimate_ahead({k: "not a tensor" for k in env})  # the estimate cannot read them: nothing kept
    ran = _no_estimate(monkeypatch)
    executor.call(node, env)
    assert len(ran) == 1
