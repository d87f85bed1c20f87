"""JSON decoding rejects every bad value with opwire's DecodeError, its path and what to do."""

from __future__ import annotations

import json

import pytest

import opwire
from opwire.schema import models as m
from opwire.serde import DecodeError, EncodeError

NODE = {
    "target": "torch.ops.aten.add.Tensor",
    "inputs": [
        {"name": "self", "arg": {"as_tensor": {"name": "x"}}, "kind": 1},
        {"name": "other", "arg": None, "kind": 1},
    ],
    "outputs": [{"as_tensor": {"name": "y"}}],
    "metadata": {},
    "is_hop_single_tensor_return": None,
    "name": "add",
}


def _node_with(arg: object) -> bytes:
    node = json.loads(json.dumps(NODE))
    node["inputs"][1]["arg"] = arg
    return json.dumps(node).encode()


@pytest.mark.parametrize(
    "arg, message",
    [
        ({"as_int": "abc"}, "Expected `i64`, got string `'abc'` - at `inputs[1].arg.as_int` in Node"),
        ({"as_int": "3"}, "Expected `i64`, got string `'3'` - at `inputs[1].arg.as_int` in Node"),
        ({"as_int": True}, "Expected `i64`, got boolean `True` - at `inputs[1].arg.as_int` in Node"),
        (
            {"as_int": 2**63},
            "Expected `i64`, got 9223372036854775808, which is out of range - at `inputs[1].arg.as_int` in Node",
        ),
        ({"as_float": "1.5"}, 'expected a number or "Infinity"/"-Infinity"/"NaN", got string \'1.5\''),
        ({"as_bool": 1}, "Expected `bool`, got integer `1` - at `inputs[1].arg.as_bool` in Node"),
        ({"as_ints": [1, None]}, "Expected `i64`, got null `None` - at `inputs[1].arg.as_ints[1]` in Node"),
        (
            {"as_tensor": {}},
            "missing required field `name` of struct TensorArgument - at `inputs[1].arg.as_tensor.name`",
        ),
        ([1], "Expected union Argument, got array - at `inputs[1].arg` in Node"),
    ],
)
def test_bad_values(arg: object, message: str) -> None:
    with pytest.raises(DecodeError) as info:
        opwire.loads(_node_with(arg), m.Node)
    assert message in str(info.value)


def test_two_members_names_union_and_members() -> None:
    with pytest.raises(DecodeError) as info:
        opwire.loads(_node_with({"as_int": 1, "as_float": 2.0}), m.Node)
    assert str(info.value).startswith(
        "union Argument needs exactly one member set, got 2 (as_int, as_float); members: as_none, as_tensor,"
    )
    assert info.value.path == "inputs[1].arg"


def test_unknown_enum_value() -> None:
    with pytest.raises(DecodeError) as info:
        opwire.loads(_node_with({"as_scalar_type": 99}), m.Node)
    assert str(info.value).startswith("unknown value 99 of enum ScalarType (known: 0, 1, 2,")
    assert "a newer schema may have written it" in str(info.value)


def test_unknown_union_member_points_at_newer_schema() -> None:
    with pytest.raises(DecodeError) as info:
        opwire.loads(_node_with({"as_tensor_list_v2": []}), m.Node)
    assert str(info.value).startswith(
        "unknown member `as_tensor_list_v2` of union Argument: the file was written by a newer schema"
    )


def test_unknown_struct_keys_are_ignored() -> None:
    node = json.loads(_node_with({"as_int": 3}))
    node["added_in_a_later_minor"] = {"x": 1}
    assert opwire.loads(json.dumps(node), m.Node).inputs[1].arg.as_int == 3


def test_non_finite_floats_round_trip_as_strings() -> None:
    for text, check in (('"Infinity"', lambda v: v == float("inf")), ('"NaN"', lambda v: v != v)):
        node = opwire.loads(_node_with(json.loads(f'{{"as_float": {text}}}')), m.Node)
        assert check(node.inputs[1].arg.as_float)
        assert f'"as_float": {text}' in opwire.dumps(node).decode()


def test_invalid_json_and_utf8() -> None:
    with pytest.raises(DecodeError, match="invalid JSON"):
        opwire.loads(b'{"target": ', m.Node)
    with pytest.raises(DecodeError, match="invalid JSON"):
        opwire.loads(b'{"target": "\xff"}', m.Node)


def _program(major: int, minor: int) -> bytes:
    gm = {
        "graph": {
            "inputs": [],
            "outputs": [],
            "nodes": [],
            "tensor_values": {},
            "sym_int_values": {},
            "sym_bool_values": {},
        },
        "signature": {"input_specs": [], "output_specs": []},
        "module_call_graph": [],
    }
    ep = {
        "graph_module": gm,
        "opset_version": {},
        "range_constraints": {},
        "schema_version": {"major": major, "minor": minor},
        "verifiers": [],
        "torch_version": "2.13.0",
        "guards_code": [],
    }
    return json.dumps(ep).encode()


def test_other_major_version_is_refused() -> None:
    with pytest.raises(DecodeError) as info:
        opwire.loads(_program(9, 0), m.ExportedProgram)
    assert str(info.value).startswith(
        "the program was written with export schema 9.0; this opwire reads major version 8 (schema 8.20)"
    )


def test_other_major_wins_over_field_errors() -> None:
    raw = json.loads(_program(9, 1))
    raw["graph_module"]["graph"]["nodes"] = [{"new": "layout"}]
    with pytest.raises(DecodeError, match=r"written with export schema 9\.1"):
        opwire.loads(json.dumps(raw), m.ExportedProgram)


def test_older_minor_is_read_and_defaults_fill_in() -> None:
    ep = opwire.loads(_program(8, 3), m.ExportedProgram)
    assert ep.schema_version.minor == 3
    assert ep.graph_module.graph.sym_float_values == {}
    assert ep.graph_module.metadata == {}


def test_wrong_class_and_format() -> None:
    with pytest.raises(DecodeError, match="Expected an opwire model class"):
        opwire.loads(b"{}", dict)  # type: ignore[type-var]
    with pytest.raises(ValueError, match="unknown format 'yaml'"):
        opwire.dumps(m.TensorArgument(name="x"), format="yaml")  # type: ignore[arg-type]


def test_encode_reports_broken_union_with_path() -> None:
    bad = m.Argument.model_construct(as_int=3, as_float=2.0)
    named = m.NamedArgument.model_construct(name="x", arg=bad, kind=None)
    with pytest.raises(EncodeError) as info:
        opwire.dumps(named)
    assert str(info.value) == (
        "cannot encode NamedArgument: union Argument needs exactly one member set, got 2 (as_int, as_float) - at `arg`"
    )


@pytest.mark.parametrize("root", [m.Graph, m.ExportedProgram])
def test_invalid_json_nested_past_the_stack_is_a_decode_error(root: type) -> None:
    """Found by the fuzzer: a lone surrogate (which only the stdlib parser takes), then nesting past its stack."""
    deep = b'{"as_list": [' * 20_000 + b"1" + b"]}" * 20_000  # past any recursion limit a test runner sets
    data = b'{"inputs": [{"name": "\\ud800"}], "nodes": [], "tensor_values": {"": {"sizes": [' + deep + b"]}}}"
    with pytest.raises(DecodeError, match="invalid JSON: unexpected end of hex escape"):
        opwire.loads(data, root)
