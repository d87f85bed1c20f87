"""The executor's own checks never let a foreign exception out: the input fuzz's non-crash findings (issue 25).

Sparse CSR/CSC inputs broke the memory estimate (no strides), the data-reading size rules (bincount, one_hot,
repeat_interleave) raised on dtypes, layouts and meta tensors they cannot reduce, and any check that raises is
turned into a refusal naming the node and the check.
"""

from __future__ import annotations

import pytest
import torch
from support.op_call import call_node

from opwire.errors import BudgetError, KernelError
from opwire.proxy_executor import ProxyExecutor
from opwire.proxy_executor.checks import Checks
from opwire.proxy_executor.write_check import WriteCheck

pytestmark = pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")

_OVER = r"outputs would take [\d,]+ bytes, over the execution-memory budget"


def _run(op: str, max_memory: int = 256 << 20, **values: object) -> object:
    node, env = call_node(op, **values)
    return ProxyExecutor(max_memory=max_memory).call(node, env)


def _compressed(layout: str) -> torch.Tensor:
    eye = torch.eye(64)
    return eye.to_sparse_csr() if layout == "csr" else eye.to_sparse_csc()


@pytest.mark.parametrize("layout", ["csr", "csc"])
@pytest.mark.parametrize(
    ("op", "values"),
    [
        ("aten::mm", lambda s: {"self": s, "mat2": torch.ones(64, 64)}),  # the estimate read strides
        ("aten::add.Tensor", lambda s: {"self": s, "other": s}),  # the light filter asked is_contiguous
        ("aten::to_dense", lambda s: {"self": s}),  # the stand-in returned: a new dense tensor, counted
    ],
)
def test_a_sparse_compressed_input_is_estimated_at_its_dense_bound(op: str, values: object, layout: str) -> None:
    args = values(_compressed(layout))  # type: ignore[operator]
    with pytest.raises(BudgetError, match=_OVER):
        _run(op, max_memory=10_000, **args)
    _run(op, **args)  # under the budget: the kernel runs


def test_a_dense_estimate_is_not_reused_for_a_sparse_input_of_its_shape() -> None:
    node, env = call_node("aten::to_dense", self=torch.eye(64).t())  # not contiguous: estimated (its input: 0 bytes)
    executor = ProxyExecutor(max_memory=10_000)
    executor.call(node, env)
    with pytest.raises(BudgetError, match=_OVER):  # a new 16 KiB tensor, not the input returned
        executor.call(node, {k: _compressed("csr") for k in env})


def test_a_sparse_compressed_input_under_the_budget_gives_the_kernels_result() -> None:
    (out,) = _run("aten::mm", self=_compressed("csr"), mat2=torch.arange(4096.0).reshape(64, 64)).values()  # type: ignore[attr-defined]
    assert torch.equal(out, torch.arange(4096.0).reshape(64, 64))


_UNSIZABLE = {
    "uint16": (lambda: torch.tensor([1, 2], dtype=torch.uint16), "must hold integers"),
    "uint32": (lambda: torch.tensor([1, 2], dtype=torch.uint32), "must hold integers"),
    "float8": (lambda: torch.tensor([1.0, 2.0]).to(torch.float8_e4m3fn), "must hold integers"),
    "meta": (lambda: torch.empty(3, dtype=torch.int64, device="meta"), "is a meta tensor: it holds no values"),
    "sparse": (lambda: torch.tensor([1, 2]).to_sparse(), "is a sparse_coo tensor; its values decide"),
    "csr": (lambda: torch.tensor([[1, 2]]).to_sparse_csr(), "is a sparse_csr tensor; its values decide"),
}


@pytest.mark.parametrize("kind", list(_UNSIZABLE))
@pytest.mark.parametrize(
    ("op", "name", "extra"),
    [
        ("aten::bincount", "self", {}),
        ("aten::one_hot", "self", {"num_classes": -1}),
        ("aten::repeat_interleave.Tensor", "repeats", {}),
    ],
)
def test_a_size_rule_refuses_values_it_cannot_read(op: str, name: str, extra: dict[str, object], kind: str) -> None:
    make, why = _UNSIZABLE[kind]
    with pytest.raises(KernelError, match="refused before the kernel ran") as info:
        _run(op, **{name: make()}, **extra)
    assert f"node ({op})" in str(info.value) and f"{name} {why}" in str(info.value)


def test_the_size_rules_still_size_what_they_read() -> None:
    with pytest.raises(BudgetError, match=_OVER):
        _run("aten::bincount", max_memory=10_000, self=torch.tensor([5000], dtype=torch.int16))
    (out,) = _run("aten::one_hot", self=torch.tensor([0, 2]), num_classes=-1).values()  # type: ignore[attr-defined]
    assert out.tolist() == [[1, 0, 0], [0, 0, 1]]


def _boom(pos: list[object], kw: dict[str, object]) -> str | None:
    return str(1 // len(pos))  # a check with a bug: ZeroDivisionError on no arguments


def _no_meta_kernel() -> None:
    raise NotImplementedError("no meta kernel")


def test_a_check_that_raises_refuses_the_call_naming_the_node_and_the_check() -> None:
    with pytest.raises(KernelError, match=r"^node 7: refused before the kernel ran: its precondition could not read "
                       r"the arguments \(ZeroDivisionError: "):  # fmt: skip
        Checks("node 7", _boom, None).before(print, [], {})
    rule = Checks("node 8", None, 1 << 20, size_rule=_boom)
    with pytest.raises(KernelError, match=r"^node 8: refused before the kernel ran: its memory estimate could not"):
        rule.before(_no_meta_kernel, [], {})  # the estimate has no meta run: the (broken) size rule runs


def test_a_kernel_error_is_still_the_kernels() -> None:
    with pytest.raises(KernelError, match=r"the kernel raised RuntimeError: .*check the inputs"):
        _run("aten::mm", self=torch.ones(2, 3), mat2=torch.ones(2, 3))


def test_the_write_checks_layout_key_takes_a_sparse_compressed_input() -> None:
    check = WriteCheck({"x": "subgraph 'g' input 'x'"}, (), ["x", "y"])
    csr, dense = _compressed("csr"), torch.ones(64, 64)
    assert check.key({"x": csr, "y": dense}) != check.key({"x": dense, "y": dense})
