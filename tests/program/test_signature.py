"""opwire.program.signature: op spelling, symbolic sizes shown readably, what extern nodes read, input checks."""

from __future__ import annotations

import pytest
import torch

from opwire.errors import BindError
from opwire.program.signature import Port, Signature, check_inputs, extern_inputs, op_name, sym_text
from opwire.proxy_executor.runner import unregistered_pytree_types
from opwire.schema import models as m


@pytest.mark.parametrize(
    "target, shown",
    [
        ("torch.ops.aten.linear.default", "aten::linear.default"),
        ("aten::linear", "aten::linear.default"),
        ("aten::add.Tensor", "aten::add.Tensor"),
        ("torch.ops.higher_order.cond", "torch.ops.higher_order.cond"),
        ("_operator.getitem", "_operator.getitem"),
    ],
)
def test_one_op_spelling(target: str, shown: str) -> None:
    assert op_name(target) == shown


@pytest.mark.parametrize(
    "expr, shown",
    [
        ("Symbol('s77', positive=True, integer=True)", "s77"),
        ("Add(Symbol('s0', integer=True), Integer(1))", "s0 + 1"),
        ("Mul(Integer(2), Add(Symbol('s0'), Integer(-1)))", "2*(s0 - 1)"),
        ("FloorDiv(Symbol('s1'), Integer(2))", "s1//2"),
        ("s0", "s0"),
        ("__import__('os').system('x')", "__import__('os').system('x')"),  # shown as written, never evaluated
        ("Add(" * 200 + "Integer(1)" + ")" * 200, "Add(" * 200 + "Integer(1)" + ")" * 200),  # too deep: as written
    ],
)
def test_symbolic_sizes_read_without_eval(expr: str, shown: str) -> None:
    assert sym_text(expr) == shown


def test_extern_inputs_are_names_no_earlier_node_produces() -> None:
    t = lambda n: m.Argument(as_tensor=m.TensorArgument(name=n))  # noqa: E731
    sym = m.Argument(as_sym_int=m.SymIntArgument(as_name="s0"))
    first = m.Node(
        target="aten::add.Tensor",
        inputs=[m.NamedArgument(name="self", arg=t("a")), m.NamedArgument(name="other", arg=t("b"))],
        outputs=[t("buf0")],
        metadata={},
    )
    second = m.Node(
        target="aten::mul.Tensor",
        inputs=[m.NamedArgument(name="self", arg=t("buf0")), m.NamedArgument(name="other", arg=sym)],
        outputs=[t("buf1")],
        metadata={},
    )
    nodes = m.ExternKernelNodes(
        nodes=[m.ExternKernelNode(name="n0", node=first), m.ExternKernelNode(name="n1", node=second)]
    )
    assert extern_inputs(nodes) == [
        {"index": 0, "name": "n0", "op": "aten::add.Tensor", "reads": ["a", "b"]},
        {"index": 1, "name": "n1", "op": "aten::mul.Tensor", "reads": ["s0"]},
    ]


def test_two_sizes_of_one_symbol_must_agree() -> None:
    sig = Signature(
        (Port("x", "Tensor", "float32", ("s0", 4), "cpu"), Port("y", "Tensor", "float32", ("s0",), "cpu")),
        (),
        {"s0": (2, None)},
    )
    check_inputs(sig, {"x": torch.zeros(3, 4), "y": torch.zeros(3)})
    with pytest.raises(BindError) as info:
        check_inputs(sig, {"x": torch.zeros(3, 4), "y": torch.zeros(5)})
    assert str(info.value) == (
        "input 'y': dim 0 is 5 but s0 is 3 (x dim 0); every dim named s0 must have the same size"
    )


def test_unregistered_pytree_types_are_named() -> None:
    spec = (
        '[1, {"type": "builtins.tuple", "context": "null", "children_spec": [{"type": "my.pkg.Output", '
        '"context": "[]", "children_spec": []}]}]'
    )
    assert unregistered_pytree_types(spec) == ["my.pkg.Output"]
    assert unregistered_pytree_types("not json") == []
