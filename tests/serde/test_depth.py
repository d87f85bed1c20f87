"""Nesting is bounded the same way in every codec: MAX_DEPTH containers, configurable, a DecodeError beyond."""

from __future__ import annotations

import pytest

import opwire
from opwire.schema import models as m
from opwire.serde import DecodeError, json, thrift
from opwire.serde.framing import MAX_DEPTH


def nested_value(levels: int) -> m.Value:
    """A Value nesting exactly `levels` (even) containers: each Value and each list counts one."""
    assert levels % 2 == 0
    value = m.Value(as_list=[])  # 2 levels
    for _ in range((levels - 2) // 2):
        value = m.Value(as_list=[value])
    return value


def _decode(data: bytes, fmt: str, max_depth: int) -> m.Value:
    if fmt == "json":
        return json.decode(data, m.Value, max_depth=max_depth)
    return thrift.decode(data, m.Value, fmt, max_depth=max_depth)  # type: ignore[arg-type]


def _levels(value: m.Value) -> int:
    depth = 1
    while value.as_list:
        value = value.as_list[0]
        depth += 2
    return depth + (1 if value.as_list is not None else 0)


def test_default_bound_is_the_same_in_every_codec(fmt: str) -> None:
    ok = nested_value(MAX_DEPTH)
    assert _levels(ok) == MAX_DEPTH
    data = opwire.dumps(ok, format=fmt)  # type: ignore[arg-type]
    assert _decode(data, fmt, MAX_DEPTH).type == "as_list"
    too_deep = opwire.dumps(nested_value(MAX_DEPTH + 2), format=fmt)  # type: ignore[arg-type]
    with pytest.raises(DecodeError, match=f"nesting deeper than max_depth={MAX_DEPTH}"):
        _decode(too_deep, fmt, MAX_DEPTH)


def test_bound_is_configurable(fmt: str) -> None:
    data = opwire.dumps(nested_value(20), format=fmt)  # type: ignore[arg-type]
    assert _decode(data, fmt, 20).type == "as_list"
    with pytest.raises(DecodeError, match="nesting deeper than max_depth=19"):
        _decode(data, fmt, 19)


def test_json_parser_stops_at_200() -> None:
    text = '{"as_list": [' * 150 + '{"as_int": 1}' + "]}" * 150
    with pytest.raises(DecodeError) as info:
        json.decode(text, m.Value, max_depth=1000)
    assert "JSON nesting stops at 200 in the parser" in str(info.value)


def test_subgraphs_are_walked_only_when_present() -> None:
    """28 nested subgraphs (7 levels each) pass JSON's parser but not the default bound; 27 fit."""
    graph = m.Graph(inputs=[], outputs=[], nodes=[], tensor_values={}, sym_int_values={}, sym_bool_values={})
    for i in range(28):
        node = m.Node(
            target="torch.ops.higher_order.cond",
            inputs=[m.NamedArgument(name="g", arg=m.Argument(as_graph=m.GraphArgument(name=f"g{i}", graph=graph)))],
            outputs=[],
            metadata={},
        )
        graph = m.Graph(inputs=[], outputs=[], nodes=[node], tensor_values={}, sym_int_values={}, sym_bool_values={})
    data = opwire.dumps(graph)
    with pytest.raises(
        DecodeError,
        match=r"^nesting deeper than max_depth=192; pass a larger max_depth if the input is trusted - at `nodes\[0\]\.inputs\[0\]",
    ):
        opwire.loads(data, m.Graph)
    inner = graph.nodes[0].inputs[0].arg.as_graph
    assert inner is not None
    assert opwire.loads(opwire.dumps(inner.graph), m.Graph) == inner.graph


def test_thrift_nesting_past_the_interpreter_stack_decodes_when_max_depth_allows(codec: str) -> None:
    """The checking decoder is iterative: max_depth is the only depth limit (issue 16), whatever
    sys.getrecursionlimit() says, and the limit is never changed."""
    import sys

    levels = 4 * sys.getrecursionlimit()  # lists inside Values: 2 levels a step
    one = opwire.dumps(m.Value(as_list=[m.Value(as_int=7)]), format=codec)  # type: ignore[arg-type]
    leaf = opwire.dumps(m.Value(as_int=7), format=codec)  # type: ignore[arg-type]
    h = len(opwire.serde.framing.write_header(codec, "Value"))
    prefix, suffix = one[h:].split(leaf[h:])
    data = one[:h] + prefix * levels + leaf[h:] + suffix * levels
    limit = sys.getrecursionlimit()
    value = _decode(data, codec, 2 * levels + 1)
    steps = 0
    while value.as_list:
        value, steps = value.as_list[0], steps + 1
    assert (steps, value.as_int) == (levels, 7)
    with pytest.raises(DecodeError, match=f"nesting deeper than max_depth={2 * levels}"):
        _decode(data, codec, 2 * levels)
    assert sys.getrecursionlimit() == limit


@pytest.mark.parametrize("fmt", ["json", "binary", "compact"])
def test_a_model_nested_past_the_interpreter_stack_is_an_encode_error(fmt: str) -> None:
    """Every writer (JSON's C writer falls back past its own bound, then the reference path) refuses a model nested
    deeper than the stack allows with one EncodeError naming the limit, never a bare RecursionError; the limit is
    never changed."""
    import sys

    from opwire.errors import EncodeError

    arg = m.Argument(as_tensor=m.TensorArgument(name="x"))
    for _ in range(sys.getrecursionlimit()):
        graph = m.Graph(inputs=[arg], outputs=[], nodes=[], tensor_values={}, sym_int_values={}, sym_bool_values={})
        arg = m.Argument(as_graph=m.GraphArgument(name="g", graph=graph))
    limit = sys.getrecursionlimit()
    with pytest.raises(
        EncodeError,
        match=rf"^cannot encode Argument: the model nests deeper than this Python stack allows \(sys.getrecursionlimit\(\) is {limit}\)",
    ):
        opwire.dumps(arg, fmt)  # type: ignore[arg-type]
    assert sys.getrecursionlimit() == limit
