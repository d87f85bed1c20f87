"""Models behave like Python values: short reprs that rebuild the model, ints for enums, tuples for lists,
unions that switch member safely, and `model_validate` on torch's JSON."""

from __future__ import annotations

import json
import math

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from support import corpus
from support.typed import MODEL_NAMES, assert_same_model, strategy_for

import opwire
from opwire.schema import models as m

_SETTINGS = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _graph(**extra: object) -> m.Graph:
    return m.Graph(inputs=[], outputs=[], nodes=[], tensor_values={}, sym_int_values={}, sym_bool_values={}, **extra)


# -- repr ------------------------------------------------------------------------------------------------------


def test_union_repr_shows_only_its_member() -> None:
    assert repr(m.Argument(as_int=3)) == "Argument(as_int=3)"
    assert repr(m.Argument(as_none=True)) == "Argument(as_none=True)"
    assert repr(m.Value(as_list=[m.Value(as_int=1)])) == "Value(as_list=[Value(as_int=1)])"
    assert str(m.Argument(as_int=3)) == "as_int=3"


def test_struct_repr_leaves_out_fields_at_their_default() -> None:
    arg = m.NamedArgument(name="x", arg=m.Argument(as_tensor=m.TensorArgument(name="t")))
    assert repr(arg) == "NamedArgument(name='x', arg=Argument(as_tensor=TensorArgument(name='t')))"
    assert (
        repr(_graph())
        == "Graph(inputs=[], outputs=[], nodes=[], tensor_values={}, sym_int_values={}, sym_bool_values={})"
    )
    shown = repr(_graph(is_single_tensor_return=True, sym_float_values={"f": m.SymFloat(as_float=1.5)}))
    assert shown.endswith("is_single_tensor_return=True, sym_float_values={'f': SymFloat(as_float=1.5)})")
    # required fields always show, even when they hold what a default would be
    assert repr(m.RangeConstraint(min_val=None, max_val=4)) == "RangeConstraint(max_val=4)"
    assert repr(m.Device(type="cpu", index=0)) == "Device(type='cpu', index=0)"


def test_enum_repr_is_the_expression_naming_it() -> None:
    assert repr(m.ScalarType.FLOAT) == "ScalarType.FLOAT"
    assert repr(m.Argument(as_scalar_type=m.ScalarType.FLOAT)) == "Argument(as_scalar_type=ScalarType.FLOAT)"
    assert m.ScalarType.FLOAT == 7 and f"{m.ScalarType.FLOAT}" == "7"


@pytest.mark.parametrize("name", MODEL_NAMES)
@_SETTINGS
@given(data=st.data())
def test_repr_rebuilds_an_equal_model(name: str, data: st.DataObject) -> None:
    """Leaving out defaults keeps the repr unambiguous: evaluating it gives back the same model."""
    obj = data.draw(strategy_for(name))
    namespace = {**vars(m), "nan": math.nan, "inf": math.inf}
    back = eval(repr(obj), namespace)
    assert_same_model(obj, back)
    assert opwire.dumps(back) == opwire.dumps(obj)


def test_union_repr_of_a_real_program_is_short() -> None:
    program = opwire.loads(corpus.get_serialized("mlp/training").json_bytes, m.ExportedProgram)
    arg = program.graph_module.graph.nodes[0].inputs[0].arg
    assert repr(arg).startswith("Argument(as_tensor=TensorArgument(name=")
    assert "=None" not in repr(program.graph_module.graph.nodes[0])


# -- enums take their int values ---------------------------------------------------------------------------------


def test_enum_fields_take_int_values() -> None:
    named = m.NamedArgument(name="x", arg=m.Argument(as_int=1), kind=1)
    assert named.kind is m.ArgumentKind.POSITIONAL
    assert m.Argument(as_scalar_type=7).as_scalar_type is m.ScalarType.FLOAT
    meta = m.TensorValue(
        dtype=13,
        sizes=[1],
        strides=[1],
        storage_offset=0,
        device=m.Device(type="cpu"),
        requires_grad=False,
        data=b"\0\0",
    )
    assert meta.dtype is m.ScalarType.BFLOAT16
    named.kind = 2
    assert named.kind is m.ArgumentKind.KEYWORD


@pytest.mark.parametrize("value", ["7", "FLOAT", True, 7.0, 14, -1, None])
def test_enum_fields_refuse_other_kinds_and_unknown_ints(value: object) -> None:
    with pytest.raises(ValidationError) as info:
        m.Argument(as_scalar_type=value)
    if value is not None:
        assert "Input should be a ScalarType member or one of the ints 0, 1, 2," in str(info.value)


@pytest.mark.parametrize("field, value", [("as_int", "3"), ("as_int", True), ("as_int", 3.0), ("as_bool", 1)])
def test_ints_and_bools_stay_strict(field: str, value: object) -> None:
    with pytest.raises(ValidationError):
        m.Argument(**{field: value})


def test_model_validate_reads_torch_json(corpus_programs: list[corpus.SerializedProgram]) -> None:
    """Every corpus program: pydantic's own `model_validate` on `json.loads` of torch's bytes gives opwire's model."""
    for p in corpus_programs:
        program = m.ExportedProgram.model_validate(json.loads(p.json_bytes))
        assert opwire.dumps(program) == p.json_bytes, p.name
        assert program == opwire.loads(p.json_bytes, m.ExportedProgram), p.name


# -- lists take tuples -------------------------------------------------------------------------------------------


def test_list_fields_take_tuples_and_torch_size() -> None:
    x = torch.zeros(2, 3)
    arg = m.Argument(as_ints=x.shape)
    assert arg.as_ints == [2, 3] and type(arg.as_ints) is list
    assert opwire.dumps(arg) == b'{"as_ints": [2, 3]}'
    assert m.Argument(as_int_lists=((1, 2), (3,))).as_int_lists == [[1, 2], [3]]
    assert m.Argument(as_strings=("a", "b")).as_strings == ["a", "b"]
    tv = m.TensorValue(
        dtype=7,
        sizes=x.shape,
        strides=x.stride(),
        storage_offset=0,
        device=m.Device(type="cpu"),
        requires_grad=False,
        data=b"",
    )
    assert (tv.sizes, tv.strides) == ([2, 3], [3, 1])


@pytest.mark.parametrize(
    "value", [{1, 2}, "12", b"12", (i for i in range(2)), {"a": 1}, memoryview(b"12"), [1, "2"], (1, 2.5)]
)
def test_list_fields_refuse_what_is_no_ordered_sequence(value: object) -> None:
    with pytest.raises(ValidationError):
        m.Argument(as_ints=value)


# -- switching a union's member ----------------------------------------------------------------------------------


def test_replace_switches_member() -> None:
    arg = m.Argument(as_int=3)
    new = arg.replace(as_float=1.0)
    assert new == m.Argument(as_float=1.0)
    assert (new.type, new.value, new.as_int) == ("as_float", 1.0, None)
    assert arg.as_int == 3  # the original is untouched
    assert opwire.dumps(new) == b'{"as_float": 1.0}'
    assert arg.replace(as_scalar_type=7).as_scalar_type is m.ScalarType.FLOAT


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"as_float": 1.0, "as_int": 2}, "got 2 \\(as_int, as_float\\)"),
        ({}, "got 0 \\(none\\)"),
        ({"as_float": "x"}, "as_float"),
        ({"as_nothing": 1}, "Extra inputs are not permitted"),
    ],
)
def test_replace_refuses_anything_but_one_valid_member(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        m.Argument(as_int=3).replace(**kwargs)


def test_model_copy_that_leaves_two_members_is_refused_at_once() -> None:
    arg = m.Argument(as_int=3)
    with pytest.raises(
        ValidationError, match="union Argument needs exactly one member set, got 2 \\(as_int, as_float\\)"
    ):
        arg.model_copy(update={"as_float": 1.0})
    assert arg.model_copy(update={"as_int": 4}) == m.Argument(as_int=4)
    assert arg.model_copy(update={"as_int": None, "as_float": 1.0}) == m.Argument(as_float=1.0)
    with pytest.raises(ValidationError):
        arg.model_copy(update={"as_int": "4"})  # the update is validated too
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        arg.model_copy(update={"as_nothing": 1})


def test_model_copy_without_update_and_deep_copies() -> None:
    arg = m.Argument(as_ints=[1, 2])
    deep = arg.model_copy(deep=True)
    assert deep == arg and deep.as_ints is not arg.as_ints
    updated = arg.model_copy(update={"as_ints": [3]}, deep=True)
    assert updated.as_ints == [3] and arg.as_ints == [1, 2]


def test_assigning_a_second_member_is_refused() -> None:
    arg = m.Argument(as_int=1)
    with pytest.raises(ValidationError, match="got 2 \\(as_int, as_float\\)"):
        arg.as_float = 2.0


def test_struct_replace_is_a_validated_copy() -> None:
    node = m.TensorArgument(name="x")
    assert node.replace(name="y") == m.TensorArgument(name="y")
    device = m.Device(type="cpu")
    assert device.replace(index=0) == m.Device(type="cpu", index=0)
    with pytest.raises(ValidationError, match="index"):
        device.replace(index="0")
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        device.replace(idx=0)  # structs ignore unknown keys when decoding; a typo here is refused


def test_no_field_shadows_the_model_methods() -> None:
    reserved = {"replace", "model_copy"} | {"type", "value"}
    for name, sdef in m.SCHEMA.structs.items():
        names = {f.name for f in sdef.fields}
        assert not names & ({"replace", "model_copy"} if sdef.kind == "struct" else reserved), name
