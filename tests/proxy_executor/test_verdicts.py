"""Precondition verdicts remembered by layout: only for preconditions that read no tensor data, keyed by geometry."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from support.op_call import call_node

from opwire.errors import KernelError
from opwire.proxy_executor import ProxyExecutor
from opwire.proxy_executor.checks import Checks
from opwire.proxy_executor.preconditions import precondition_for
from opwire.proxy_executor.verdicts import Verdicts

NAMES = ((0, "self"), (1, "n"))


def _counting(check: Any) -> tuple[list[int], Any]:
    calls: list[int] = []

    def pre(pos: list[Any], kw: dict[str, Any]) -> str | None:
        calls.append(1)
        return check(pos, kw)  # type: ignore[no-any-return]

    return calls, pre


def test_a_shape_only_precondition_runs_once_per_layout() -> None:
    calls, pre = _counting(lambda pos, kw: None if pos[0].dim() == 2 else "must be 2-D")
    checks = Checks("node", pre, None, arg_names=NAMES)
    x = torch.ones(3, 4)
    for _ in range(3):
        checks.before(lambda *a: None, [x, 1], {})
    assert len(calls) == 1 + 1  # the real run and its meta run, once
    checks.before(lambda *a: None, [torch.ones(4, 3).t(), 1], {})  # another stride: a new layout
    checks.before(lambda *a: None, [x, 2], {})  # another value
    assert len(calls) == 2 + 2 + 2
    with pytest.raises(KernelError, match="must be 2-D"):
        checks.before(lambda *a: None, [torch.ones(3), 1], {})  # a failure is never remembered
    with pytest.raises(KernelError, match="must be 2-D"):
        checks.before(lambda *a: None, [torch.ones(3), 1], {})


def test_a_precondition_that_reads_data_runs_on_every_call() -> None:
    calls, pre = _counting(lambda pos, kw: None if int(pos[0].max()) < 5 else "too large")
    checks = Checks("node", pre, None, arg_names=NAMES)
    checks.before(lambda *a: None, [torch.tensor([1, 2]), 1], {})
    assert checks.verdicts is not None and checks.verdicts.reads_data and not checks.verdicts.passed
    with pytest.raises(KernelError, match="too large"):
        checks.before(lambda *a: None, [torch.tensor([1, 9]), 1], {})  # same layout, other data
    assert len(calls) == 3  # real, meta (raised on the data read), real again


def test_the_meta_run_has_the_least_storage_the_geometry_needs() -> None:
    """A check comparing an extent with the storage passes on the meta copy only if it passes for any storage."""
    needed = lambda pos, kw: None if pos[0].untyped_storage().nbytes() >= 64 else "storage too small"  # noqa: E731
    verdicts = Verdicts(NAMES)
    big = torch.ones(64)[:4]  # 4 elements of a 64-element storage
    key = verdicts.key([big, 1], {})
    assert verdicts.check(needed, [big, 1], {}, key) is None
    assert not verdicts.passed  # the meta copy (4 elements) fails: not remembered
    assert verdicts.check(needed, [torch.ones(4), 1], {}, key) == "storage too small"


def test_unkeyable_arguments_are_checked_every_time() -> None:
    verdicts = Verdicts(NAMES)
    assert verdicts.key([torch.ones(2).to_sparse(), 1], {}) is None
    assert verdicts.key([torch.ones(2), {"a": 1}], {}) is None
    assert verdicts.key([torch.ones(2), [1, 2]], {}) is not None


def test_out_of_range_embedding_indices_after_a_passing_call_are_still_refused() -> None:
    """The embedding family reads the indices: a passing call of one shape does not let the next skip the check."""
    w = torch.randn(10, 3)
    ok, env = call_node("aten::_embedding_bag", weight=w, indices=torch.tensor([1, 2, 3]), offsets=torch.tensor([0]))
    ex = ProxyExecutor()
    ex.call(ok, env)
    env[next(k for k, v in env.items() if v.dtype == torch.int64 and v.numel() == 3)] = torch.tensor([1, 2, 10**9])
    with pytest.raises(KernelError, match=r"refused before the kernel ran: indices .* must lie in \[0, 10\)"):
        ex.call(ok, env)


def test_a_family_precondition_that_reads_no_data_is_remembered_by_layout() -> None:
    """The shared rule refusing meta tensors does not refuse the verdicts' own meta copies (lstm/training ran its
    LSTM check on every call, 1.5x the unchecked run, when it did)."""
    names = [a.name for a in torch.ops.aten.native_batch_norm.default._schema.arguments]
    pre = precondition_for("aten::native_batch_norm", names)
    checks = Checks("node", pre, None, arg_names=tuple(enumerate(names)))
    x, w = torch.randn(2, 3, 4), torch.randn(3)
    args = [x, w, w, torch.zeros(3), torch.ones(3), False, 0.1, 1e-5]
    checks.before(lambda *a: None, args, {})
    assert checks.verdicts is not None and checks.verdicts.passed and not checks.verdicts.reads_data
    with pytest.raises(KernelError, match="input is a meta tensor"):  # a file's meta tensor is still refused
        checks.before(lambda *a: None, [x.to("meta"), *args[1:]], {})
