"""Bound once, never stale: a program's nodes are bound once per runner, and in-place edits are seen."""

from __future__ import annotations

import threading

import pytest
import torch

import opwire
from opwire.program import opened_of
from opwire.proxy_executor import BindError, ProgramRunner, ProxyExecutor
from opwire.schema import models as m
from opwire.schema.edits import CountedList, edit_count, snapshot, track, unchanged
from opwire.serde import torch_bridge


class _Chain(torch.nn.Module):
    def __init__(self, n: int, sign: int = 1) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(4, 4) for _ in range(n))
        self.sign = sign

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = torch.relu(layer(x)) + self.sign
        return x.sum(dim=[1])


def _archive(n: int = 2) -> tuple[torch.nn.Module, m.OpwireArchive, torch.Tensor]:
    torch.manual_seed(0)
    mod, x = _Chain(n), torch.randn(2, 4)
    return mod, torch_bridge.archive_from_exported_program(torch.export.export(mod, (x,))), x


def _nodes(archive: m.OpwireArchive, target: str) -> list[m.Node]:
    """Nodes calling `target` ("aten.add.Tensor"; torch's files spell it torch.ops.aten.add.Tensor)."""
    return [n for n in archive.program.graph_module.graph.nodes if n.target == f"torch.ops.{target}"]


def _long_program(n: int) -> tuple[m.OpwireArchive, torch.Tensor]:
    """x -> relu(linear(x)) + 1 -> n more `+ 1` nodes: a program of n + 4 nodes, built without tracing n ops."""
    _, archive, x = _archive(1)
    graph = archive.program.graph_module.graph
    add = _nodes(archive, "aten.add.Tensor")[0]
    total = _nodes(archive, "aten.sum.dim_IntList")[0]
    prev = add.outputs[0].as_tensor.name  # type: ignore[union-attr]
    extra = []
    for i in range(n):
        name = f"chain_{i}"
        node = add.model_copy(deep=True)
        node.inputs[0] = m.NamedArgument(
            name="self", arg=m.Argument(as_tensor=m.TensorArgument(name=prev)), kind=m.ArgumentKind(1)
        )
        node.outputs = [m.Argument(as_tensor=m.TensorArgument(name=name))]
        graph.tensor_values[name] = graph.tensor_values[prev]
        extra.append(node)
        prev = name
    total.inputs[0] = m.NamedArgument(
        name="self", arg=m.Argument(as_tensor=m.TensorArgument(name=prev)), kind=m.ArgumentKind(1)
    )
    at = graph.nodes.index(total)
    graph.nodes = [*graph.nodes[:at], *extra, *graph.nodes[at:]]
    return archive, x


def _input(node: m.Node, name: str) -> m.NamedArgument:
    return next(na for na in node.inputs if na.name == name)


def test_a_5000_node_program_runs_twice_through_run_program_with_one_bind() -> None:
    archive, x = _long_program(5000)
    short, _ = _long_program(0)
    nodes = archive.program.graph_module.graph.nodes
    assert len(nodes) == 5004
    first = opwire.run_program(archive, (x,))
    (runner,) = (r for _, r in opened_of(archive)._bound.values())  # the opened program owns its runners
    assert runner.binds == len(nodes)
    second = opwire.run_program(archive, (x,))
    assert runner.binds == len(nodes)  # no node bound again
    torch.testing.assert_close(first, opwire.run_program(short, (x,)) + 5000 * x.shape[1])
    torch.testing.assert_close(second, first)


def test_editing_node_targets_after_a_run_is_seen() -> None:
    mod, archive, x = _archive()
    torch.testing.assert_close(opwire.run_program(archive, (x,)), mod(x))
    for node in _nodes(archive, "aten.add.Tensor"):
        node.target = "torch.ops.aten.sub.Tensor"
    minus = _Chain(2, sign=-1)
    minus.load_state_dict(mod.state_dict())
    torch.testing.assert_close(opwire.run_program(archive, (x,)), minus(x))


@pytest.mark.parametrize("edit", ["argument replaced", "list element replaced", "list appended", "int list element"])
def test_every_kind_of_in_place_edit_is_seen(edit: str) -> None:
    mod, archive, x = _archive()
    runner = ProgramRunner(archive)
    torch.testing.assert_close(runner(x), mod(x))
    adds = _nodes(archive, "aten.add.Tensor")
    plus = {
        "argument replaced": 3,  # every `+ 1` becomes `+ 3`
        "list element replaced": 3,
        "list appended": 2,  # alpha=2: `+ 1 * 2`
        "int list element": 1,
    }[edit]
    for add in adds:
        other = _input(add, "other")
        if edit == "argument replaced":
            other.arg = m.Argument(as_int=3)
        elif edit == "list element replaced":
            add.inputs[add.inputs.index(other)] = m.NamedArgument(
                name="other", arg=m.Argument(as_int=3), kind=other.kind
            )
        elif edit == "list appended":
            add.inputs.append(m.NamedArgument(name="alpha", arg=m.Argument(as_int=2), kind=m.ArgumentKind(2)))
    if edit == "int list element":
        (total,) = _nodes(archive, "aten.sum.dim_IntList")
        dims = _input(total, "dim").arg.as_ints
        assert dims is not None
        dims[0] = 0
        assert runner(x).shape == (4,)
        return
    want = _Chain(2, sign=plus)
    want.load_state_dict(mod.state_dict())
    torch.testing.assert_close(runner(x), want(x))


def test_deleting_a_node_is_seen() -> None:
    _, archive, x = _archive()
    runner = ProgramRunner(archive)
    runner(x)
    nodes = archive.program.graph_module.graph.nodes
    del nodes[[n.target for n in nodes].index("torch.ops.aten.add.Tensor")]
    with pytest.raises(BindError, match=r"refers to value 'add', which the values do not hold"):
        runner(x)


def test_an_edit_that_breaks_a_node_is_refused_with_a_bind_error_until_fixed() -> None:
    _, archive, x = _archive()
    runner = ProgramRunner(archive)
    runner(x)
    add = _nodes(archive, "aten.add.Tensor")[0]
    add.target = "torch.ops.aten.no_such_op.default"
    with pytest.raises(opwire.UnknownTargetError):
        runner(x)
    with pytest.raises(opwire.UnknownTargetError):
        runner(x)  # still refused: the old plan never runs for the edited node
    add.target = "torch.ops.aten.add.Tensor"
    runner(x)


def test_untouched_nodes_keep_their_plans_after_an_edit_elsewhere() -> None:
    _, archive, x = _archive(4)
    runner = ProgramRunner(archive)
    runner(x)
    first = runner.binds
    _nodes(archive, "aten.add.Tensor")[0].target = "torch.ops.aten.sub.Tensor"
    runner(x)
    assert runner.binds == first + 1  # only the edited node was bound again
    m.Argument(as_int=1).as_int = 2  # an edit of an unrelated model: a look, no rebinding
    runner(x)
    assert runner.binds == first + 1


def test_weights_replaced_in_the_archive_build_a_new_runner() -> None:
    _, archive, x = _archive()
    before = opwire.run_program(archive, (x,))
    name = "layers.1.bias"
    bias = archive.weights[name]
    zero = m.TensorValue(**{**bias.__dict__, "data": bytes(len(bias.data))})
    archive.weights[name] = zero
    after = opwire.run_program(archive, (x,))
    assert not torch.allclose(before, after)


def test_runner_state_survives_copies_and_does_not_touch_equality_or_bytes() -> None:
    _, archive, x = _archive()
    data = opwire.dumps(archive.program)
    opwire.run_program(archive, (x,))
    assert opwire.dumps(archive.program) == data
    copy = archive.model_copy(deep=True)
    assert copy == archive
    assert "_opwire_opened" not in copy.model_dump()
    assert opened_of(copy) is not opened_of(archive)  # a copy is not what the runner was built from
    assert opwire.loads(opwire.dumps(archive, "compact"), m.OpwireArchive, "compact") == archive


def test_runs_from_several_threads_agree() -> None:
    mod, archive, x = _archive(8)
    want = mod(x)
    errors: list[BaseException] = []
    results: list[torch.Tensor] = []

    def work() -> None:
        try:
            for _ in range(5):
                results.append(opwire.run_program(archive, (x,)))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(results) == 20 and all(torch.allclose(r, want) for r in results)


def test_proxy_executor_sees_an_edited_node_and_keeps_a_bounded_table() -> None:
    ex = ProxyExecutor()
    node = m.Node(
        target="aten::mul.Tensor",
        inputs=[
            m.NamedArgument(name=n, arg=m.Argument(as_tensor=m.TensorArgument(name=n)), kind=m.ArgumentKind(1))
            for n in ("self", "other")
        ],
        outputs=[m.Argument(as_tensor=m.TensorArgument(name="out"))],
        metadata={},
    )
    a, b = torch.full((2,), 3.0), torch.full((2,), 2.0)
    assert torch.equal(ex.call(node, {"self": a, "other": b})["out"], a * b)
    node.target = "aten::add.Tensor"
    assert torch.equal(ex.call(node, {"self": a, "other": b})["out"], a + b)
    node.outputs[0] = m.Argument(as_tensor=m.TensorArgument(name="renamed"))
    assert set(ex.call(node, {"self": a, "other": b})) == {"renamed"}


def test_counted_lists_count_every_mutation_and_copy_as_plain_lists() -> None:
    arg = m.Argument(as_ints=[1, 2, 3])
    track(arg)
    ints = arg.as_ints
    assert isinstance(ints, CountedList)
    before = snapshot(arg)
    for mutate in (
        lambda v: v.append(4),
        lambda v: v.extend([5]),
        lambda v: v.insert(0, 0),
        lambda v: v.remove(0),
        lambda v: v.pop(),
        lambda v: v.sort(),
        lambda v: v.reverse(),
        lambda v: v.__setitem__(0, 9),
        lambda v: v.__delitem__(0),
        lambda v: v.__iadd__([7]),
        lambda v: v.__imul__(1),
        lambda v: v.clear(),
    ):
        count = edit_count()
        mutate(ints)
        assert edit_count() != count
    assert not unchanged(before, arg)
    import copy

    assert type(copy.deepcopy(ints)) is list and type(copy.copy(ints)) is list
