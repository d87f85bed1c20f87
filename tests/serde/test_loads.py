"""`opwire.loads` without a type or format, and the errors for a wrong format or a wrong root type; the
relation between pydantic's `model_dump_json()` and `opwire.dumps()`."""

from __future__ import annotations

import json

import pytest
from support import corpus

import opwire
from opwire.errors import DecodeError
from opwire.schema import models as m
from opwire.serde import thrift

_SNAP = m.OpLibrarySnapshot(namespaces=["mylib"], ops=[], torch_version="2.13.0")
_NODES = m.ExternKernelNodes(nodes=[])


def test_loads_without_type_reads_what_the_data_holds(fmt: str) -> None:
    program = opwire.loads(corpus.get_serialized("mlp/training").json_bytes, m.ExportedProgram)
    for obj in (program, _SNAP, _NODES, m.Values(values={"x": m.Value(as_int=1)})):
        back = opwire.loads(opwire.dumps(obj, fmt))  # type: ignore[arg-type]
        assert type(back) is type(obj) and back == obj


def test_loads_without_format_takes_the_header_codec(codec: str) -> None:
    data = opwire.dumps(_SNAP, codec)  # type: ignore[arg-type]
    assert opwire.loads(data, m.OpLibrarySnapshot) == _SNAP
    assert opwire.loads(data, m.OpLibrarySnapshot, format=codec) == _SNAP  # type: ignore[arg-type]


def test_loads_with_type_and_format_is_unchanged() -> None:
    raw = corpus.get_serialized("mlp/training").json_bytes
    assert opwire.dumps(opwire.loads(raw, m.ExportedProgram, format="json")) == raw
    assert opwire.loads(raw.decode(), m.ExportedProgram) == opwire.loads(raw, m.ExportedProgram)
    plain = thrift.encode(_SNAP, "compact", framed=False)
    assert opwire.loads(plain, m.OpLibrarySnapshot, format="compact") == _SNAP


def test_wrong_format_says_which_format_the_data_is(codec: str, fmt: str) -> None:
    """Thrift `codec` with opwire's header, asked for as any other format."""
    data = opwire.dumps(_SNAP, codec)  # type: ignore[arg-type]
    if fmt == codec:
        assert opwire.loads(data, m.OpLibrarySnapshot, format=fmt) == _SNAP  # type: ignore[arg-type]
        return
    with pytest.raises(DecodeError) as info:
        opwire.loads(data, m.OpLibrarySnapshot, format=fmt)  # type: ignore[arg-type]
    assert str(info.value) == (
        f"the data is Thrift {codec} with opwire's header (root type OpLibrarySnapshot), not {fmt}; "
        f"read it with format='{codec}', or leave format out"
    )


def test_json_read_as_thrift_says_it_is_json(codec: str) -> None:
    with pytest.raises(DecodeError) as info:
        opwire.loads(opwire.dumps(_SNAP), m.OpLibrarySnapshot, format=codec)  # type: ignore[arg-type]
    assert str(info.value) == f"the data is JSON, not Thrift {codec}; read it with format='json', or leave format out"


def test_wrong_root_type_in_thrift_names_what_the_file_holds(codec: str) -> None:
    with pytest.raises(DecodeError) as info:
        opwire.loads(opwire.dumps(_SNAP, codec), m.ExternKernelNodes)  # type: ignore[arg-type]
    assert (
        str(info.value) == "the file holds a OpLibrarySnapshot, not a ExternKernelNodes; read it as OpLibrarySnapshot"
    )


def test_wrong_root_type_in_json_names_what_the_file_holds() -> None:
    with pytest.raises(DecodeError) as info:
        opwire.loads(opwire.dumps(_NODES), m.ExportedProgram)
    assert str(info.value) == (
        "the JSON's top-level keys are those of ExternKernelNodes, not ExportedProgram (missing graph_module, "
        "opset_version, range_constraints, schema_version, verifiers, torch_version, guards_code); read it as "
        "ExternKernelNodes, or call opwire.loads(data) without a type"
    )


def test_a_bad_value_of_the_right_type_keeps_its_field_error() -> None:
    """A Graph has a `nodes` key like ExternKernelNodes: with every Graph field present the field error wins."""
    graph = json.loads(
        opwire.dumps(m.Graph(inputs=[], outputs=[], nodes=[], tensor_values={}, sym_int_values={}, sym_bool_values={}))
    )
    graph["nodes"] = 3
    with pytest.raises(DecodeError, match="Expected `list<Node>`, got integer `3` - at `nodes` in Graph"):
        opwire.loads(json.dumps(graph), m.Graph)


@pytest.mark.parametrize(
    ("data", "fmt", "message"),
    [
        (
            thrift.encode(_SNAP, "compact", framed=False),
            None,
            "input: neither JSON nor Thrift with opwire's header; raw Thrift needs its codec and type: "
            "opwire.loads(data, cls, format=...)",
        ),
        (
            thrift.encode(_SNAP, "compact", framed=False),
            "compact",
            "raw Thrift compact (no opwire header) does not say what type it holds; pass the type: "
            "opwire.loads(data, m.ExportedProgram, format='compact') (models: opwire.schema.models)",
        ),
        (b"[1, 2]", None, "input: expected a JSON object at the top level, got list"),
        (
            b'{"a": 1}',
            None,
            "input: JSON object with keys ['a'] is none of the types opwire reads (ExportedProgram, "
            "ExternKernelNodes, OpwireArchive, CallTrace, OpLibrarySnapshot, Values)",
        ),
        (b"\x89OPWIRE\n\x01", None, "not an opwire Thrift file: the header is truncated (9 bytes, at least 19 needed)"),
    ],
)
def test_loads_without_type_errors(data: bytes, fmt: str | None, message: str) -> None:
    with pytest.raises(DecodeError) as info:
        opwire.loads(data, None, format=fmt)  # type: ignore[arg-type]
    assert str(info.value) == message


def test_header_naming_an_unknown_type() -> None:
    from opwire.serde.framing import write_header

    with pytest.raises(DecodeError, match="the header names root type 'NoSuchType', which this opwire does not know"):
        opwire.loads(write_header("compact", "NoSuchType") + b"\0")


# -- model_dump_json() and dumps() -------------------------------------------------------------------------------


def test_model_dump_json_spells_bytes_differently() -> None:
    """The differences the docs name: separators, non-ASCII, exponent spelling."""
    arg = m.Argument(as_floats=[1e16, 1e-07])
    assert opwire.dumps(arg) == b'{"as_floats": [1e+16, 1e-07]}'
    assert arg.model_dump_json() == '{"as_floats":[1e+16,1e-7]}'
    name = m.TensorArgument(name="é")
    assert opwire.dumps(name) == b'{"name": "\\u00e9"}'
    assert name.model_dump_json() == '{"name":"é"}'


def test_model_dump_json_of_a_corpus_program_matches_torch_document() -> None:
    raw = corpus.get_serialized("conv_bn/decomposed").json_bytes
    program = opwire.loads(raw, m.ExportedProgram)
    assert json.loads(program.model_dump_json()) == json.loads(raw)
    assert program.model_dump_json().encode() != raw
    assert opwire.dumps(program) == raw
