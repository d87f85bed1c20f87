"""IDL-driven tensor walkers: every TensorArgument an Argument carries, found and renamed."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from support.typed import assert_same_model, strategy_for

import opwire
from opwire.schema import models as m
from opwire.schema.refs import rename_tensors, tensor_names, value_names

T = m.TensorArgument


def test_each_tensor_member() -> None:
    none, some = m.OptionalTensorArgument(as_none=True), m.OptionalTensorArgument(as_tensor=T(name="x"))
    graph = m.Graph(inputs=[m.Argument(as_tensor=T(name="inner"))], outputs=[], nodes=[], tensor_values={},
                    sym_int_values={}, sym_bool_values={})  # fmt: skip
    cases = {
        "a": m.Argument(as_tensor=T(name="a")),
        "a b": m.Argument(as_tensors=[T(name="a"), T(name="b")]),
        "": m.Argument(as_optional_tensor=none),
        "x": m.Argument(as_optional_tensors=[none, some, none]),
        "p q": m.Argument(as_nested_tensors=[[T(name="p")], [], [T(name="q")]]),
        "z": m.Argument(as_string_to_argument={"k": m.Argument(as_tensor=T(name="z")), "i": m.Argument(as_int=1)}),
        " ": m.Argument(as_graph=m.GraphArgument(name="g", graph=graph)),  # a subgraph's tensors are its own
    }
    for names, arg in cases.items():
        assert tensor_names(arg) == names.split(), arg


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(arg=strategy_for("Argument"))
def test_rename_renames_exactly_the_tensors(arg: m.Argument) -> None:
    renamed = rename_tensors(arg, lambda n: f"<{n}>")
    assert tensor_names(renamed) == [f"<{n}>" for n in tensor_names(arg)]
    back = rename_tensors(renamed, lambda n: n[1:-1])
    assert_same_model(back, arg)
    assert opwire.dumps(back) == opwire.dumps(arg)


def test_value_names_reads_every_named_value() -> None:
    sym = m.Argument(as_sym_ints=[m.SymIntArgument(as_name="s0"), m.SymIntArgument(as_int=3)])
    assert value_names(sym) == ["s0"] and tensor_names(sym) == []
    obj = m.Argument(as_custom_obj=m.CustomObjArgument(name="obj", class_fqn="a.B"))
    assert value_names(obj) == ["obj"]
    nested = m.Argument(as_string_to_argument={"k": m.Argument(as_tensor=m.TensorArgument(name="t"))})
    assert value_names(nested) == ["t"] == tensor_names(nested)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(arg=strategy_for("Argument"))
def test_value_names_include_the_tensor_names(arg: m.Argument) -> None:
    names = value_names(arg)
    assert [n for n in names if n in set(tensor_names(arg))] == tensor_names(arg)
