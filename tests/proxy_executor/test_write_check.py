"""Undeclared writes into parameters and inputs, found by storage and bytes, not by alias annotations (issue 25).

`_unsafe_view`, `unsafe_split` and `einsum('i->i')` return views no schema declares, and `native_batch_norm`
writes its running stats with no annotation; an in-place write through them, at the top level or inside a cond
branch, must be a BindError that leaves the parameter and the caller's input as they were.
"""

from __future__ import annotations

import pytest
import torch
from support.hostile_exec import node, t

import opwire
from opwire.errors import BindError
from opwire.proxy_executor.runner import ProgramRunner
from opwire.schema import models as m
from opwire.serde import torch_bridge


def _ints(*v: int) -> m.Argument:
    return m.Argument(as_ints=list(v))


def _alias(kind: str, source: str) -> list[m.Node]:
    """A node making tensor `view` an alias of `source` that no schema annotation declares."""
    if kind == "_unsafe_view":
        return [node("aten::_unsafe_view", {"self": t(source), "size": _ints(16)}, "view")]
    if kind == "einsum":
        tensors = m.Argument(as_tensors=[m.TensorArgument(name=source)])
        return [node("aten::einsum", {"equation": m.Argument(as_string="i->i"), "tensors": tensors}, "view")]
    split = node("aten::unsafe_split.Tensor", {"self": t(source), "split_size": m.Argument(as_int=16)}, "unused")
    split.outputs = [m.Argument(as_tensors=[m.TensorArgument(name="view")])]
    return [split]


def _attack(kind: str, source: str, out: str, other: str = "view") -> list[m.Node]:
    """`alias(source).add_(other)`, then `out = x + p_w` (what the honest program returns)."""
    return [
        *_alias(kind, source),
        node("aten::add_.Tensor", {"self": t("view"), "other": t(other)}, "written"),
        node("aten::add.Tensor", {"self": t("x"), "other": t("p_w")}, out),
    ]


class _Param(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.w


class _Cond(_Param):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cond(x.sum() > 0, lambda x, w: x + w, lambda x, w: x - w, (x, self.w))  # type: ignore[no-any-return]


def _top_level(nodes: list[m.Node]) -> m.OpwireArchive:
    """A program with parameter `p_w` and user input `x` running `nodes` and returning `out`."""
    archive = torch_bridge.archive_from_exported_program(torch.export.export(_Param(), (torch.ones(16),)))
    gm = archive.program.graph_module
    gm.graph.nodes = nodes
    gm.graph.outputs = [t("out")]
    gm.signature.output_specs[0].value.arg = t("out")
    return archive


def _in_branch(nodes: list[m.Node]) -> m.OpwireArchive:
    """`cond(x.sum() > 0, true, false, (x, p_w))` whose true branch runs `nodes` (returning `add`)."""
    archive = torch_bridge.archive_from_exported_program(torch.export.export(_Cond(), (torch.ones(16),)))
    cond = next(n for n in archive.program.graph_module.graph.nodes if n.target.endswith("cond"))
    cond.inputs[1].arg.value.graph.nodes = nodes
    return archive


def _weight(archive: m.OpwireArchive) -> torch.Tensor:
    return ProgramRunner(archive).state["w"]


KINDS = ["_unsafe_view", "einsum", "unsafe_split"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("source", ["p_w", "x"])
def test_a_write_through_an_undeclared_view_is_refused_at_the_top_level(kind: str, source: str) -> None:
    runner = ProgramRunner(_top_level(_attack(kind, source, "out")))
    x = torch.ones(16)
    label = "parameter 'w'" if source == "p_w" else "user input 'x'"
    for _ in range(2):  # refused every time: a failed checking pass is not remembered as passed
        with pytest.raises(BindError, match=rf"node 1 .*writes into {label} through 'view', which shares its storage"):
            runner(x)
        assert x.tolist() == [1.0] * 16 and runner.state["w"].tolist() == [1.0] * 16  # put back, both


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("source", ["p_w", "x"])
def test_a_write_through_an_undeclared_view_is_refused_inside_a_cond_branch(kind: str, source: str) -> None:
    archive = _in_branch(_attack(kind, source, "add"))
    runner = ProgramRunner(archive)
    x = torch.ones(16)
    with pytest.raises(
        BindError, match=rf"subgraph 'true_graph_0' node 1 .*writes into subgraph 'true_graph_0' input {source!r}"
    ):
        runner(x)
    assert x.tolist() == [1.0] * 16 and runner.state["w"].tolist() == [1.0] * 16


def test_a_branch_first_taken_in_a_later_run_is_checked_then() -> None:
    """The first run takes the honest branch and passes its checking pass; the hostile branch is checked when taken."""
    archive = _in_branch(_attack("_unsafe_view", "p_w", "add"))
    assert opwire.run_program(archive, (-torch.ones(16),)).tolist() == [-2.0] * 16
    assert opwire.run_program(archive, (-torch.ones(16),)).tolist() == [-2.0] * 16
    with pytest.raises(BindError, match="writes into subgraph 'true_graph_0' input 'p_w'"):
        opwire.run_program(archive, (torch.ones(16),))
    assert opwire.run_program(archive, (-torch.ones(16),)).tolist() == [-2.0] * 16  # the parameter is intact


def test_a_write_that_changes_no_byte_is_still_seen_by_its_version() -> None:
    """`add_(view, zeros)` leaves the bytes as they were on the checking pass, not on later data: refused anyway."""
    nodes = [
        *_alias("_unsafe_view", "p_w"),
        node("aten::mul.Scalar", {"self": t("x"), "other": m.Argument(as_int=0)}, "z"),
    ]
    nodes += _attack("_unsafe_view", "p_w", "out", other="z")[1:]
    runner = ProgramRunner(_top_level(nodes))
    with pytest.raises(BindError, match="writes into parameter 'w' through 'view'"):
        runner(torch.ones(16))
    assert runner.state["w"].tolist() == [1.0] * 16


def test_an_unannotated_kernel_write_into_a_parameter_is_refused() -> None:
    """native_batch_norm's schema marks no argument written, yet in training mode it updates running_mean/var."""
    i = lambda v: m.Argument(as_int=v)  # noqa: E731
    nodes = [
        node("aten::view", {"self": t("x"), "size": _ints(2, 8)}, "x2"),
        node("aten::slice.Tensor", {"self": t("p_w"), "dim": i(0), "start": i(0), "end": i(8)}, "mean"),
        node("aten::slice.Tensor", {"self": t("p_w"), "dim": i(0), "start": i(8), "end": i(16)}, "var"),
        node(
            "aten::native_batch_norm",
            {
                "input": t("x2"), "weight": m.Argument(as_none=True), "bias": m.Argument(as_none=True),
                "running_mean": t("mean"), "running_var": t("var"), "training": m.Argument(as_bool=True),
                "momentum": m.Argument(as_float=0.5), "eps": m.Argument(as_float=1e-5),
            },
            m.Argument(as_tensors=[m.TensorArgument(name=n) for n in ("y", "m", "r")]),
        ),
        node("aten::add.Tensor", {"self": t("x"), "other": t("p_w")}, "out"),
    ]  # fmt: skip
    batch = nodes[3]
    batch.outputs = [t("y"), t("m"), t("r")]
    runner = ProgramRunner(_top_level(nodes))
    with pytest.raises(BindError, match=r"node 3 \(aten::native_batch_norm\) writes into parameter 'w' through 'mean'"):
        runner(torch.arange(16.0))
    assert runner.state["w"].tolist() == [1.0] * 16


def test_an_honest_program_is_checked_once_per_input_layout() -> None:
    runner = ProgramRunner(torch.export.export(_Param(), (torch.ones(16),)))
    check = runner.bound.write_check
    assert check is None  # bound on the first run
    assert runner(torch.ones(16)).tolist() == [2.0] * 16
    check = runner.bound.write_check
    assert check is not None and len(check.verified) == 1 and check.fixed == ("p_w",)
    runner(torch.zeros(16))
    assert len(check.verified) == 1  # same layout: no new checking pass
    runner(torch.zeros(16, 2)[:, 0])
    assert len(check.verified) == 2  # another stride: checked again


def test_batch_norm_running_stats_still_update_in_training() -> None:
    """Buffers are each run's own copies (or the runner's state): their declared mutation is no violation."""
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4)).train()
    x = torch.randn(8, 4)
    ep = torch.export.export(model, (x,))
    runner = ProgramRunner(ep)
    expected = model(x)
    got = runner(x)
    assert torch.allclose(got, expected, atol=1e-6)
    assert torch.allclose(runner.state["1.running_mean"], model[1].running_mean, atol=1e-6)
    assert runner.state["1.num_batches_tracked"].item() == 1
    fresh = opwire.run_program(ep, (x,))
    assert torch.allclose(fresh, expected, atol=1e-6)


def test_a_layout_names_its_parameters_weakly() -> None:
    """Tables passed to run_with are not kept alive, and a freed parameter's identity no longer counts as checked."""
    import gc
    import weakref

    runner = ProgramRunner(torch.export.export(_Param(), (torch.ones(16),)))
    state = {k: v.clone() for k, v in runner.state.items()}
    runner.run_with(state, runner.constants, (torch.ones(16),), {})
    check = runner.bound.write_check
    assert check is not None
    (key,) = check.verified
    alive = weakref.ref(state["w"])
    del state
    gc.collect()
    assert alive() is None and not check.holds(key) and not check.verified


def test_a_write_through_an_undeclared_view_is_refused_inside_a_map_body() -> None:
    """map passes each row of the caller's input to its body: a write into a row is a write into the input."""
    from torch._higher_order_ops.map import map as hop_map

    class _Map(torch.nn.Module):
        def forward(self, xs: torch.Tensor) -> torch.Tensor:
            return hop_map(lambda x: x * 2, xs)  # type: ignore[no-any-return]

    archive = torch_bridge.archive_from_exported_program(torch.export.export(_Map(), (torch.ones(4, 16),)))
    body = archive.program.graph_module.graph.nodes[0].inputs[0].arg.value.graph
    body.nodes = [
        *_alias("_unsafe_view", "xs"),
        node("aten::add_.Tensor", {"self": t("view"), "other": t("view")}, "written"),
        node("aten::mul.Tensor", {"self": t("xs"), "other": m.Argument(as_int=2)}, "mul"),
    ]
    xs = torch.ones(4, 16)
    with pytest.raises(BindError, match=r"subgraph 'body_graph_0' node 1 .*writes into subgraph 'body_graph_0' input"):
        opwire.run_program(archive, (xs,))
    assert xs.tolist() == [[1.0] * 16] * 4
