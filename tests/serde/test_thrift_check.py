"""The C check after a Thrift encode (`_cplan.thrift_check`, `_cbuild_src/thrift_check.c`): True for every valid
value of every schema type, never True where `fast.verify` (fastbinary's decode with the IDL's checks) says
False, and bounded on hostile bytes. It only answers whether written bytes may be returned: the bytes are the
codec's either way."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from support import corpus
from support.typed import MODEL_NAMES, mutate_bytes, strategy_for

import opwire
from opwire.schema import models as m
from opwire.serde import _cplan, thrift, torch_bridge
from opwire.serde._thrift import fast

CODECS = ("binary", "compact")
_SPLICES = [b"\x00", b"\x01", b"\x02", b"\x0c", b"\x19", b"\x7f\xff\xff\xff", b"\xff\xff\xff\xff\x0f"]


def test_the_check_is_built() -> None:
    assert _cplan.AVAILABLE
    from opwire.serde import _cbuild

    assert hasattr(_cbuild, "thrift_check")  # the module was built with thrift_check.c


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(name=st.sampled_from(MODEL_NAMES), codec=st.sampled_from(CODECS), data=st.data())
def test_every_valid_value_of_every_schema_type_passes(name: str, codec: str, data: st.DataObject) -> None:
    obj = data.draw(strategy_for(name))
    payload = fast.encode(obj, codec)
    assert _cplan.thrift_check(payload, name, codec)
    assert fast.verify(payload, name, codec)


@pytest.mark.parametrize("codec", CODECS)
def test_a_corpus_archive_passes_and_encodes_as_before(codec: str) -> None:
    archive = torch_bridge.archive_from_exported_program(corpus.get_program("mlp/decomposed").ep)
    payload = thrift.encode(archive, codec, framed=False)  # type: ignore[arg-type]
    assert _cplan.thrift_check(payload, "OpwireArchive", codec)
    assert thrift.decode(payload, m.OpwireArchive, codec, framed=False) == archive  # type: ignore[arg-type]


def _node(outputs: list[m.Argument]) -> m.Node:
    return m.Node.model_construct(target="aten::neg", inputs=[], outputs=outputs, metadata={})


def _broken() -> list[BaseModel]:
    """Models the IDL rules out, alone and nested where a valid value would be (`_node([ok, ok, ok])` passes)."""
    arguments = [
        m.Argument.model_construct(as_int=1, as_bool=True),  # two members
        m.Argument.model_construct(),  # none
        m.Argument.model_construct(as_scalar_type=99),  # an enum value the IDL does not know
        m.Argument.model_construct(as_tensor=m.TensorArgument.model_construct(name=None)),  # a required field unset
    ]
    ok = m.Argument(as_int=1)
    return [*arguments, *(_node([ok, arg, ok]) for arg in arguments)]


@pytest.mark.parametrize("codec", CODECS)
def test_the_valid_node_the_broken_ones_are_nested_in_passes(codec: str) -> None:
    ok = m.Argument(as_int=1)
    assert _cplan.thrift_check(fast.encode(_node([ok, ok, ok]), codec), "Node", codec)


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("obj", _broken(), ids=repr)
def test_a_value_breaking_the_idl_is_declined_and_refused(codec: str, obj: BaseModel) -> None:
    payload = fast.encode(obj, codec)  # the codec writes what the model holds
    name = type(obj).__name__
    assert not _cplan.thrift_check(payload, name, codec)
    assert not fast.verify(payload, name, codec)
    with pytest.raises(opwire.serde.EncodeError):
        thrift.encode(obj, codec)  # type: ignore[arg-type]


@st.composite
def _mutated(draw: st.DrawFn) -> tuple[str, str, bytes]:
    name = draw(st.sampled_from(MODEL_NAMES))
    codec = draw(st.sampled_from(CODECS))
    return name, codec, mutate_bytes(fast.encode(draw(strategy_for(name)), codec), draw, _SPLICES, 300)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(case=_mutated())
def test_mutated_bytes_pass_only_where_verify_passes(case: tuple[str, str, bytes]) -> None:
    name, codec, payload = case
    if _cplan.thrift_check(payload, name, codec):
        assert fast.verify(payload, name, codec)


@pytest.mark.parametrize("codec", CODECS)
def test_truncated_inflated_and_deep_bytes_are_declined(codec: str) -> None:
    payload = fast.encode(opwire.loads(corpus.get_program("mlp/training").json_bytes, m.ExportedProgram), codec)
    assert _cplan.thrift_check(payload, "ExportedProgram", codec)
    for cut in range(0, len(payload), max(1, len(payload) // 300)):
        assert not _cplan.thrift_check(payload[:cut], "ExportedProgram", codec)
    assert not _cplan.thrift_check(payload + b"\x00", "ExportedProgram", codec)
    huge = b"\x7f\xff\xff\xff" if codec == "binary" else b"\xff\xff\xff\xff\x07"
    for pos in range(0, len(payload), max(1, len(payload) // 200)):
        mutated = payload[:pos] + huge + payload[pos + len(huge) :]
        if _cplan.thrift_check(mutated, "ExportedProgram", codec):
            assert fast.verify(mutated, "ExportedProgram", codec)
    union = b"\x0f\x00\xd2\x0c\x00\x00\x00\x01" if codec == "binary" else b"\x09\x00"  # Argument.as_list, opened
    assert not _cplan.thrift_check(b"".join([union] * 70), "Argument", codec)  # past 64 nested structs


@settings(max_examples=250, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(name=st.sampled_from(MODEL_NAMES), codec=st.sampled_from(CODECS), data=st.data())
def test_the_encode_specs_write_the_builders_bytes(name: str, codec: str, data: st.DataObject) -> None:
    """`fast.encode` writes with the `_checker` classes' specs: the same bytes as with the builders' (fastbinary's
    encoder reads only the spec), for every schema type."""
    obj = data.draw(strategy_for(name))
    assert fast.encode(obj, codec) == fast._ENCODERS[codec](obj, fast._build_specs()[name])


@pytest.mark.parametrize("codec", CODECS)
def test_the_encode_specs_write_a_corpus_archive_as_the_builders(codec: str) -> None:
    archive = torch_bridge.archive_from_exported_program(corpus.get_program("mlp/decomposed").ep)
    assert fast.encode(archive, codec) == fast._ENCODERS[codec](archive, fast._build_specs()["OpwireArchive"])
