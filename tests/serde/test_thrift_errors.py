"""Every Thrift decode and encode error: its class, whole message (for the important ones) and path."""

from __future__ import annotations

import time

import pytest

import opwire
from opwire.errors import DecodeError, EncodeError
from opwire.schema import models as m
from opwire.serde import framing, thrift

NODE = m.Node(
    target="aten::add",
    inputs=[m.NamedArgument(name="x", arg=m.Argument(as_tensor=m.TensorArgument(name="a")))],
    outputs=[],
    metadata={},
)
RAW = thrift.encode(NODE, "compact", framed=False)
FRAMED = thrift.encode(NODE, "compact")
I64_ONE = b"\x00" * 7 + b"\x01"


def _decode_error(data: bytes, cls: type, codec: str = "binary", **kw: object) -> DecodeError:
    with pytest.raises(DecodeError) as info:
        thrift.decode(data, cls, codec, **kw)  # type: ignore[arg-type]
    return info.value


def test_truncated() -> None:
    err = _decode_error(RAW[:-3], m.Node, "compact")
    assert str(err) == (
        "truncated input: needed 1 more byte at offset 27, 0 remain; the data is cut short or corrupt - at `$` in Node"
    )


def test_every_truncation_is_a_decode_error(codec: str, engine: str) -> None:
    raw = thrift.encode(NODE, codec, framed=False)  # type: ignore[arg-type]
    for cut in range(len(raw)):
        _decode_error(raw[:cut], m.Node, codec, engine=engine)


def test_trailing_bytes() -> None:
    err = _decode_error(RAW + b"\x00", m.Node, "compact")
    assert str(err) == (
        "1 trailing bytes after the Node value (offset 30 of 31); the data holds something else than one Node, "
        "or is corrupt - at `$` in Node"
    )


def test_union_without_members() -> None:
    err = _decode_error(b"\x00", m.Argument)
    assert str(err).startswith("union Argument needs exactly one member set, got 0 (none); members: as_none, ")
    assert err.path == "$"


def test_union_with_two_members() -> None:
    two = b"\x02\x00\x0a\x01" + b"\x0a\x00\x32" + I64_ONE + b"\x00"  # as_none=true, as_int=1
    err = _decode_error(two, m.Argument)
    assert str(err).startswith("union Argument needs exactly one member set, got 2 (as_none, as_int)")


def test_unknown_union_member_says_newer_schema() -> None:
    err = _decode_error(b"\x0a\x03\xe7" + I64_ONE + b"\x00", m.Argument)
    assert str(err).startswith(
        "unknown member id 999 of union Argument: a newer schema than this opwire reads (8.20) wrote it; "
        "known members: as_none (10), as_tensor (20),"
    )


def test_unknown_enum_value_says_newer_schema() -> None:
    raw = b"\x08\x00\x82\x00\x00\x00\x63\x00"  # as_scalar_type = 99
    err = _decode_error(raw, m.Argument)
    assert str(err) == (
        "unknown value 99 of enum ScalarType (known: 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 28, 29, 30, 31, "
        "32, 33, 34, 35); a newer schema than this opwire reads (8.20) may have written it, or the file is corrupt "
        "- at `as_scalar_type` in Argument"
    )
    assert err.path == "as_scalar_type"


def test_newer_minor_in_header_is_named() -> None:
    raw = bytearray(thrift.encode(m.Argument(as_scalar_type=m.ScalarType.FLOAT), "binary"))
    raw[12:14] = (23).to_bytes(2, "big")
    raw[-2] = 0x63
    assert "a newer schema (the file says 8.23) may have written it" in str(_decode_error(bytes(raw), m.Argument))


def test_invalid_utf8() -> None:
    err = _decode_error(b"\x0b\x00\x0a\x00\x00\x00\x02\xff\xfe\x00", m.TensorArgument)
    assert str(err) == "invalid UTF-8 in a string (invalid start byte at byte 0) - at `name` in TensorArgument"


def test_wrong_wire_type() -> None:
    err = _decode_error(b"\x08\x00\x0a\x00\x00\x00\x02\x00", m.TensorArgument)
    assert str(err) == ("Expected `string` (wire type string/binary), got wire type i32 - at `name` in TensorArgument")


def test_wrong_list_element_type() -> None:
    raw = b"\x0f\x00\x46\x0b\x00\x00\x00\x01\x00\x00\x00\x00\x00"  # as_ints: list of 1 string
    assert "Expected list elements of `i64`, got wire type string/binary - at `as_ints`" in str(
        _decode_error(raw, m.Argument)
    )


def test_missing_required_field() -> None:
    err = _decode_error(b"\x00", m.TensorArgument)
    assert str(err) == "missing required field `name` of struct TensorArgument - at `name` in TensorArgument"


def test_duplicate_field() -> None:
    one = b"\x0b\x00\x0a\x00\x00\x00\x01x"
    assert "field `name` (id 10) of TensorArgument appears twice" in str(
        _decode_error(one + one + b"\x00", m.TensorArgument)
    )


@pytest.mark.parametrize(
    ("raw", "cls", "codec", "message"),
    [
        (b"\x0b\x00\x0a\x7f\xff\xff\xff", m.TensorArgument, "binary", "string length 2147483647 exceeds the 0 bytes"),
        (b"\x0b\x00\x0a\xff\xff\xff\xff", m.TensorArgument, "binary", "negative string length -1"),
        (b"\xa9\xfc\xff\xff\xff\xff\x0f", m.ExternKernelNodes, "compact", "list length 4294967295 exceeds the 0"),
        (b"\x1b\xff\xff\xff\xff\x07\x88", m.Values, "compact", "map length 2147483647 exceeds the 0 bytes"),
        (b"\x0f\x00\x0a\x0c\x7f\xff\xff\xff", m.ExternKernelNodes, "binary", "list length 2147483647 exceeds"),
    ],
)
def test_lengths_larger_than_the_input_are_refused(raw: bytes, cls: type, codec: str, message: str) -> None:
    assert message in str(_decode_error(raw, cls, codec))


def test_overlong_varint_is_linear() -> None:
    start = time.perf_counter()
    err = _decode_error(b"\x06\x28" + b"\xff" * 2_000_000, m.SymIntArgument, "compact")
    assert time.perf_counter() - start < 2
    assert "varint longer than 10 bytes at offset 2" in str(err)
    assert err.path == "as_int"


def test_varint_overflow() -> None:
    assert "varint at offset 11 overflows 64 bits" in str(
        _decode_error(b"\x06\x28" + b"\xff" * 9 + b"\x7f", m.SymIntArgument, "compact")
    )


def test_invalid_type_codes() -> None:
    assert "invalid wire type code 99" in str(_decode_error(b"\x63\x00\x01", m.TensorArgument))
    assert "invalid compact type code 14" in str(_decode_error(b"\x1e", m.TensorArgument, "compact"))


def test_invalid_bool_byte() -> None:
    assert "invalid bool byte 7 (expected 0 or 1)" in str(_decode_error(b"\x02\x00\x0a\x07\x00", m.Argument))


def test_nesting_bound() -> None:
    deep = b"\x09\xf0\x01\x1c" * 300 + b"\x00"
    err = _decode_error(deep, m.Value, "compact")
    assert str(err).startswith("nesting deeper than max_depth=192; pass a larger max_depth if the input is trusted")
    skipped = _decode_error(b"\x19" * 300_000, m.TensorArgument, "compact")  # inside an unknown field
    assert "nesting deeper than max_depth=192" in str(skipped) and skipped.path == "<field 1>"
    shallow = _decode_error(FRAMED, m.Node, "compact", max_depth=2)
    assert "nesting deeper than max_depth=2" in str(shallow) and shallow.path == "inputs[0]"


def test_header_errors() -> None:
    assert str(_decode_error(FRAMED, m.Node, "binary")) == (
        "the file holds Thrift compact, not binary; read it with format='compact'"
    )
    assert str(_decode_error(FRAMED, m.Graph, "compact")) == "the file holds a Node, not a Graph; read it as Node"
    assert str(_decode_error(FRAMED[:12], m.Node, "compact")) == (
        "not an opwire Thrift file: the header is truncated (12 bytes, at least 19 needed)"
    )
    assert str(_decode_error(RAW, m.Node, "compact", framed=True)) == (
        "not an opwire Thrift file: it does not start with opwire's magic bytes"
    )


def test_other_major_version_is_refused_naming_both() -> None:
    raw = bytearray(FRAMED)
    raw[10:12] = (9).to_bytes(2, "big")
    assert str(_decode_error(bytes(raw), m.Node, "compact")) == (
        "the file was written with export schema 9.20; this opwire reads major version 8 (schema 8.20). "
        "Convert it with an opwire built for schema 9.x"
    )
    rec = bytearray(thrift.encode(m.TensorDigest(sha256="x", nan_count=0, inf_count=0), "compact"))
    rec[14:16] = (2).to_bytes(2, "big")
    assert f"written with opwire records 2.{m.RECORDS_VERSION[1]}; this opwire reads major version 1" in str(
        _decode_error(bytes(rec), m.TensorDigest, "compact")
    )


def test_newer_minor_version_is_read() -> None:
    raw = bytearray(FRAMED)
    raw[12:14] = (99).to_bytes(2, "big")
    assert thrift.decode(bytes(raw), m.Node, "compact") == NODE
    assert framing.sniff(bytes(raw)) == ("compact", "Node", (8, 99))


def test_sniff() -> None:
    assert framing.sniff(FRAMED) == ("compact", "Node", (8, 20))
    assert framing.sniff(thrift.encode(m.Values(values={}), "binary")) == ("binary", "Values", m.RECORDS_VERSION)
    assert framing.sniff(b'{"graph_module": {}}') is None
    assert framing.sniff(b"PK\x03\x04") is None
    assert framing.sniff(RAW) is None


def test_bad_arguments() -> None:
    with pytest.raises(DecodeError, match="Expected bytes for format 'compact', got str"):
        opwire.loads("abc", m.Node, "compact")
    with pytest.raises(
        DecodeError, match=r"Expected an opwire model class \(opwire.schema.models\), got <class 'int'>"
    ):
        thrift.decode(b"", int, "compact")  # type: ignore[type-var]
    with pytest.raises(ValueError, match="unknown Thrift codec 'json'"):
        thrift.decode(b"", m.Node, "json")  # type: ignore[arg-type]
    with pytest.raises(EncodeError, match="Expected an opwire model"):
        thrift.encode(object(), "compact")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("obj", "message", "path"),
    [
        (
            m.Argument.model_construct(as_int=1, as_bool=True),
            "cannot encode Argument: union Argument needs exactly one member set, got 2 (as_int, as_bool) - at `$`",
            "$",
        ),
        (
            m.TensorArgument.model_construct(name=None),
            "cannot encode TensorArgument: required field `name` of struct TensorArgument is not set - at `name`",
            "name",
        ),
        (
            m.Argument.model_construct(as_scalar_type=99),
            "cannot encode Argument: Expected enum ScalarType, got 99 - at `as_scalar_type`",
            "as_scalar_type",
        ),
        (
            m.TensorArgument.model_construct(name=5),
            "cannot encode TensorArgument: Expected `string`, got int - at `name`",
            "name",
        ),
    ],
)
def test_encode_errors(obj: object, message: str, path: str, codec: str, engine: str) -> None:
    with pytest.raises(EncodeError) as info:
        thrift.encode(obj, codec, engine=engine)  # type: ignore[arg-type]
    assert str(info.value) == message
    assert info.value.path == path


def test_json_looking_input_nested_past_the_stack_is_a_decode_error(codec: str) -> None:
    """The "this is JSON, not Thrift" probe must not overflow on deep JSON-looking bytes (a RecursionError before)."""
    with pytest.raises(DecodeError):
        opwire.loads(b'{"a": ' + b"[" * 5000, m.Graph, codec)  # type: ignore[arg-type]
