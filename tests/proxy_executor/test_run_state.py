"""Nothing leaks out of a run (RNG, grad mode, modes, inputs, parameters), and the execution budgets count what matters."""

from __future__ import annotations

import time

import pytest
import torch
from support.hostile_exec import nested_while, node, ones_nodes, program, sym_string_mul, t, write_input_nodes
from torch.utils._python_dispatch import TorchDispatchMode

import opwire
from opwire.errors import BindError, BudgetError, KernelError
from opwire.proxy_executor import ProgramRunner, ProxyExecutor
from opwire.schema import models as m

_LIB = torch.library.Library("opwire_state_test", "DEF")
_LIB.define("leaky(Tensor x) -> Tensor")


class _Mode(TorchDispatchMode):  # type: ignore[misc]
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        return func(*args, **(kwargs or {}))


def _leaky(x: torch.Tensor) -> torch.Tensor:
    """A (trusted) library op that changes process state: grad mode and a pushed mode."""
    torch.set_grad_enabled(False)
    torch._C._push_on_torch_dispatch_stack(_Mode())  # type: ignore[no-untyped-call]
    return x + 1


_LIB.impl("leaky", _leaky, "CompositeExplicitAutograd")


def _randn_node() -> m.Node:
    return node("aten::randn", {"size": m.Argument(as_ints=[4])}, "r")


def _next_random() -> list[float]:
    return torch.rand(3).tolist()


def test_call_restores_the_generator_grad_mode_and_modes() -> None:
    torch.manual_seed(7)
    expected = _next_random()
    torch.manual_seed(7)
    ex = ProxyExecutor()
    ex.call(_randn_node(), {})
    with torch.enable_grad():
        opwire.run_program(program([node("opwire_state_test::leaky", {"x": t("x")}, "out")]), (torch.ones(16),))
        assert torch.is_grad_enabled()
    assert torch._C._len_torch_dispatch_stack() == 0
    assert _next_random() == expected  # randn did not move the host's generator


def test_call_function_restores_the_generator() -> None:
    torch.manual_seed(3)
    expected = _next_random()
    torch.manual_seed(3)
    ex = ProxyExecutor(m.ExternKernelNodes(nodes=[m.ExternKernelNode(name="buf0", node=_randn_node())]))
    slots: list[object] = [None]
    ex.call_function(0, [4], slots)
    assert isinstance(slots[0], torch.Tensor) and _next_random() == expected


def test_run_program_and_replay_restore_the_generator() -> None:
    archive = program([_randn_node(), node("aten::add.Tensor", {"self": t("r"), "other": t("x")}, "out")])
    torch.manual_seed(5)
    expected = _next_random()
    torch.manual_seed(5)
    opwire.run_program(archive, (torch.ones(4),))
    assert _next_random() == expected
    with opwire.record() as trace:
        torch.randn(4)
    torch.manual_seed(5)
    opwire.replay(trace, mode="isolated")
    assert _next_random() == expected


def test_undeclared_write_into_a_user_input_runs_on_a_copy() -> None:
    x = torch.ones(16)
    out = opwire.run_program(program(write_input_nodes()), (x,))
    assert x.tolist() == [1.0] * 16  # the caller's tensor never changes
    assert out[0].item() == 18.0 and out[1].item() == 2.0  # the program computed on its copy


def _param_program(nodes: list[m.Node]) -> m.OpwireArchive:
    class _P(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(4))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + self.w

    from opwire.serde import torch_bridge

    archive = torch_bridge.archive_from_exported_program(torch.export.export(_P(), (torch.ones(4),)))
    gm = archive.program.graph_module
    w_name = gm.signature.input_specs[0].value.arg.name
    x_name = gm.signature.input_specs[1].value.arg.value.name
    for n in nodes:
        for na in n.inputs:
            if na.arg.type == "as_tensor" and na.arg.value.name in ("w", "x"):
                na.arg = t(w_name if na.arg.value.name == "w" else x_name)
    gm.graph.nodes = nodes
    gm.graph.outputs = [t("out")]
    gm.signature.output_specs[0].value.arg = t("out")
    return archive


def test_undeclared_write_into_a_parameter_is_refused_and_fresh_runs_stay_fresh() -> None:
    nodes = [
        node("aten::mul_.Tensor", {"self": t("w"), "other": t("x")}, "w2"),
        node("aten::add.Tensor", {"self": t("x"), "other": t("w")}, "out"),
    ]
    runner = ProgramRunner(_param_program(nodes))
    with pytest.raises(BindError, match=r"writes into parameter 'w' through argument 'self', but the program's"):
        runner(torch.full((4,), 3.0))
    assert runner.state["w"].tolist() == [1.0] * 4
    view = [node("aten::select.int", {"self": t("w"), "dim": m.Argument(as_int=0), "index": m.Argument(as_int=0)},
                 "w0"), *nodes]  # fmt: skip
    view[1] = node("aten::fill_.Scalar", {"self": t("w0"), "value": m.Argument(as_int=5)}, "w2")
    with pytest.raises(BindError, match=r"through 'w0', a view of it"):
        opwire.run_program(_param_program(view), (torch.ones(4),))


def test_declared_buffer_mutation_runs_and_fresh_runs_are_fresh() -> None:
    class _Count(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("n", torch.zeros(1))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.n.add_(1)
            return x + self.n

    from opwire.serde import torch_bridge

    archive = torch_bridge.archive_from_exported_program(torch.export.export(_Count(), (torch.ones(1),)))
    runner = ProgramRunner(archive)
    assert [runner(torch.zeros(1)).item() for _ in range(3)] == [1.0, 2.0, 3.0]
    assert [runner.run_fresh((torch.zeros(1),)).item() for _ in range(2)] == [1.0, 1.0]
    assert [opwire.run_program(archive, (torch.zeros(1),)).item() for _ in range(2)] == [1.0, 1.0]


def test_while_loop_iterations_are_a_total_per_run_across_nesting() -> None:
    archive = nested_while(10, 10)  # 10 outer + 100 inner iterations; each loop alone is under 60
    with pytest.raises(BudgetError, match=r"while_loop ran 60 iterations in this run") as info:
        opwire.run_program(archive, (torch.tensor(0), torch.zeros(3)), max_while_iterations=60)
    assert info.value.budget == "max_while_iterations"
    i, x = opwire.run_program(archive, (torch.tensor(0), torch.zeros(3)), max_while_iterations=110)  # n, not n+1
    assert i.item() == 10 and x.tolist() == [100.0] * 3


def test_a_huge_factory_call_is_refused_before_it_allocates() -> None:
    ex = ProxyExecutor(m.ExternKernelNodes(nodes=[m.ExternKernelNode(name="b", node=ones_nodes(3 * 2**28)[0])]))
    start = time.monotonic()
    with pytest.raises(BudgetError, match=r"outputs would take 3,221,225,472 bytes, over the execution-memory") as info:
        ex.call(0, {})
    assert info.value.budget == "max_memory" and time.monotonic() - start < 5
    small = ProxyExecutor(max_memory=1 << 10)
    with pytest.raises(BudgetError, match=r"4,096 bytes, over the execution-memory budget of 1,024 bytes"):
        small.call(ones_nodes(1024)[0], {})
    assert small.call(ones_nodes(16)[0], {})["big"].shape == (16,)


def test_static_shapes_are_checked_at_bind() -> None:
    class _Big(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return (x * 2).sum()

    from opwire.serde import torch_bridge

    archive = torch_bridge.archive_from_exported_program(torch.export.export(_Big(), (torch.ones(1024),)))
    seen: list[str] = []
    runner = ProgramRunner(archive, max_memory=1000, observer=lambda n, _: seen.append(n.target))
    with pytest.raises(BudgetError, match=r"node outputs take 4,100 bytes by their recorded shapes .*nothing ran"):
        runner(torch.ones(1024))
    assert seen == []


def test_fixed_table_operands_and_results_are_typed() -> None:
    start = time.monotonic()
    with pytest.raises(BindError, match=r"argument 'a' is as_string; symbolic arithmetic takes int, float, bool"):
        opwire.run_program(program(sym_string_mul()), (torch.ones(16),))
    assert time.monotonic() - start < 5
    div = node("_operator.truediv", {"a": m.Argument(as_int=1), "b": m.Argument(as_int=2)},
               m.Argument(as_sym_int=m.SymIntArgument(as_name="s")))  # fmt: skip
    with pytest.raises(KernelError, match=r"the result is float '0.5' but the output is as_sym_int"):
        ProxyExecutor().call(div, {})
    ok = node("_operator.mul", {"a": m.Argument(as_int=6), "b": m.Argument(as_int=7)},
              m.Argument(as_sym_int=m.SymIntArgument(as_name="s")))  # fmt: skip
    assert ProxyExecutor().call(ok, {}) == {"s": 42}
