"""The steady state of a bound graph: a layout whose run passed every check skips the checks that read only shapes.

What must keep running on a layout that passed: preconditions that read data (embedding indices), and every
check of a graph whose shapes depend on data (nonzero) or on a branch. A new layout is checked in full.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from support.hostile_exec import node, program, t

from opwire.errors import BudgetError, KernelError
from opwire.proxy_executor import checks as checks_module
from opwire.proxy_executor.runner import ProgramRunner
from opwire.schema import models as m


def _ints(*v: int) -> m.Argument:
    return m.Argument(as_ints=list(v))


def _counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    before = checks_module.Checks.before

    def counting(self: Any, fn: Any, pos: list[Any], kw: dict[str, Any]) -> None:
        seen.append(self.where)
        before(self, fn, pos, kw)

    monkeypatch.setattr(checks_module.Checks, "before", counting)
    return seen


def test_a_layout_that_passed_skips_its_shape_only_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    nodes = [
        node("aten::zeros", {"size": _ints(16, 16)}, "z"),
        node("aten::mm", {"self": t("z"), "mat2": t("z")}, "zz"),
        node("aten::clone", {"self": t("x")}, "c"),
        node("aten::add.Tensor", {"self": t("c"), "other": t("zz")}, "out"),
    ]
    runner = ProgramRunner(program(nodes))
    seen = _counted(monkeypatch)
    runner(torch.ones(16))
    assert seen  # the first run of a layout: every check
    seen.clear()
    assert runner(torch.full((16,), 2.0))[0].tolist() == [2.0] * 16
    assert runner.bound._stable and not seen  # the same layout again: nothing but the kernels
    with pytest.raises(BudgetError, match="outputs would take"):
        runner(torch.ones(1).expand(2**34))  # a new layout (4 bytes expanded to 64 GiB): checked in full
    # (and the write check kept the 4 bytes the protected input spans, not its 2**34 elements)


def test_a_precondition_that_reads_data_keeps_running_on_a_layout_that_passed() -> None:
    long = m.Argument(as_scalar_type=m.ScalarType.LONG)
    bag = node(
        "aten::_embedding_bag",
        {"weight": t("w"), "indices": t("x"), "offsets": t("offsets")},
        m.Argument(as_tensor=m.TensorArgument(name="out")),
    )
    bag.outputs = [t(n) for n in ("out", "offset2bag", "bag_size", "max_indices")]
    nodes = [
        node("aten::ones", {"size": _ints(10, 3)}, "w"),
        node("aten::zeros", {"size": _ints(1), "dtype": long}, "offsets"),
        bag,
    ]
    runner = ProgramRunner(program(nodes))
    for _ in range(3):
        assert runner(torch.arange(16) % 10).shape == (1, 3)
    assert runner.bound._stable and runner.bound._steady is not None
    with pytest.raises(KernelError, match=r"refused before the kernel ran: indices .* must lie in \[0, 10\)"):
        runner(torch.tensor([0] * 15 + [10**9]))  # the same layout, other data


def test_a_graph_whose_shapes_depend_on_data_keeps_every_check(monkeypatch: pytest.MonkeyPatch) -> None:
    nodes = [
        node("aten::nonzero", {"self": t("x")}, "nz"),
        node("aten::clone", {"self": t("nz")}, "out"),
    ]
    runner = ProgramRunner(program(nodes))
    runner(torch.ones(16))
    seen = _counted(monkeypatch)
    runner(torch.ones(16))
    assert not runner.bound._stable and seen  # nonzero is tagged dynamic_output_shape: checked on every run
