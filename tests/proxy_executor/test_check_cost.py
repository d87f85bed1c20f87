"""The cheap paths of the memory check (issue 25, "the checks cost little") refuse what the full estimate refuses."""

from __future__ import annotations

import pytest
import torch
from support.op_call import call_node

from opwire.errors import BudgetError
from opwire.proxy_executor import ProxyExecutor

_OVER = r"outputs would take [\d,]+ bytes, over the execution-memory budget"


@pytest.mark.parametrize(
    ("op", "values"),
    [
        # each input is small, but the broadcast of the two is not: the element-count product sees it
        ("aten::add.Tensor", {"self": torch.ones(64, 1), "other": torch.ones(1, 64)}),
        # an expanded view counts its elements, not its storage's
        ("aten::mul.Tensor", {"self": torch.ones(1).expand(4096), "other": torch.ones(1)}),
        ("aten::relu", {"self": torch.ones(1).expand(4096)}),
        # out= is resized to the result: an empty `out` bounds nothing
        ("aten::add.out", {"self": torch.ones(64, 1), "other": torch.ones(1, 64), "out": torch.ones(0)}),
        # reviewed as bounded by the product of their inputs: a small product skips the estimate, this one is not small
        ("aten::mm", {"self": torch.ones(64, 1), "mat2": torch.ones(1, 64)}),
        ("aten::linear", {"input": torch.ones(64, 1), "weight": torch.ones(64, 1)}),
        # one tensor in, but the output's size is an argument (these took the light filter before)
        ("aten::select_backward", {"grad_output": torch.ones(64), "input_sizes": [64, 64], "dim": 0, "index": 0}),
        ("aten::multinomial", {"self": torch.ones(4), "num_samples": 4096, "replacement": True}),
        ("aten::fft_fftn", {"self": torch.ones(4), "s": [4096]}),
    ],
)
def test_a_small_budget_is_held_by_the_cheap_filters(op: str, values: dict[str, object]) -> None:
    node, env = call_node(op, **values)
    with pytest.raises(BudgetError, match=_OVER):
        ProxyExecutor(max_memory=10_000).call(node, env)


def test_calls_under_the_budget_run_and_repeat() -> None:
    """The same node twice (the cached estimate) and with a number in a tensor's place."""
    node, env = call_node("aten::add.Tensor", self=torch.ones(8, 1), other=torch.ones(1, 8))
    ex = ProxyExecutor(max_memory=10_000)
    for _ in range(2):
        assert ex.call(node, env)["out0"].shape == (8, 8)
    conv, cenv = call_node("aten::conv2d", input=torch.ones(1, 1, 4, 4), weight=torch.ones(1, 1, 3, 3), padding=[1, 1])
    for _ in range(2):
        assert ex.call(conv, cenv)["out0"].shape == (1, 1, 4, 4)
    wide, wenv = call_node(
        "aten::conv2d", input=torch.ones(1, 1, 4, 4), weight=torch.ones(1, 1, 1, 1), padding=[60, 60]
    )
    with pytest.raises(BudgetError, match=_OVER):  # the same tensor shapes, another padding: estimated again
        ex.call(wide, wenv)
