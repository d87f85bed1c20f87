"""Thrift binary and compact: round trips of every type, the corpus, golden bytes, and every engine agreeing."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.golden_bytes import check_golden
from support.typed import MODEL_NAMES, assert_same_model, strategy_for

import opwire
from opwire.errors import DecodeError, EncodeError
from opwire.schema import models as m
from opwire.serde import framing, thrift
from opwire.serde._thrift import fast
from opwire.serde._thrift.spec import FAST_STRUCT_DEPTH

_SETTINGS = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("name", MODEL_NAMES)
@_SETTINGS
@given(data=st.data())
def test_round_trip_every_type(name: str, codec: str, data: st.DataObject) -> None:
    """Each drawn value through the default path, then through every engine alone: a differential check (the same
    value through both engines), at half the draws of one test per engine."""
    obj = data.draw(strategy_for(name))
    raw = opwire.dumps(obj, codec)  # type: ignore[arg-type]
    back = opwire.loads(raw, m.MODELS[name], codec)  # type: ignore[arg-type]
    assert_same_model(obj, back)
    assert opwire.dumps(back, codec) == raw  # type: ignore[arg-type]
    payload = thrift.encode(obj, codec, framed=False)  # type: ignore[arg-type]
    assert raw.endswith(payload) and framing.sniff(raw) is not None
    assert_same_model(thrift.decode(payload, m.MODELS[name], codec, framed=False), back)  # type: ignore[arg-type]
    for engine in thrift.ENGINES:  # each engine alone agrees byte for byte and value for value with both together
        assert thrift.encode(obj, codec, framed=False, engine=engine) == payload, engine  # type: ignore[arg-type]
        alone = thrift.decode(payload, m.MODELS[name], codec, framed=False, engine=engine)  # type: ignore[arg-type]
        assert_same_model(alone, back)


def test_corpus_json_compact_json_is_byte_identical(corpus_programs: list, codec: str) -> None:
    """Every corpus program JSON -> Thrift -> JSON, byte for byte, through every engine alone."""
    for prog in corpus_programs:
        model = opwire.loads(prog.json_bytes, m.ExportedProgram)
        raw = opwire.dumps(model, codec)
        for engine in thrift.ENGINES:
            assert thrift.encode(model, codec, engine=engine) == raw, (prog.name, engine)  # type: ignore[arg-type]
            back = thrift.decode(raw, m.ExportedProgram, codec, engine=engine)  # type: ignore[arg-type]
            assert opwire.dumps(back) == prog.json_bytes, (prog.name, engine)
        assert framing.sniff(raw) == (codec, "ExportedProgram", m.SCHEMA_VERSION)


def test_compact_is_smaller_than_json(corpus_programs: list) -> None:
    for prog in corpus_programs:
        model = opwire.loads(prog.json_bytes, m.ExportedProgram)
        assert len(opwire.dumps(model, "compact")) < len(prog.json_bytes), prog.name


def _deep_value(levels: int) -> m.Value:
    v = m.Value(as_int=7)
    for _ in range(levels):
        v = m.Value(as_list=[v])
    return v


def test_deeper_than_the_c_codec_takes_the_checked_path(codec: str, engine: str) -> None:
    v = _deep_value(FAST_STRUCT_DEPTH + 10)  # fastbinary refuses > 64 nested structs, both ways
    raw = thrift.encode(v, codec)  # type: ignore[arg-type]
    assert_same_model(thrift.decode(raw, m.Value, codec), v)  # type: ignore[arg-type]
    if engine == "fastbinary":
        with pytest.raises(EncodeError, match=r"^cannot encode Value with engine='fastbinary': .* at most 64 nested"):
            thrift.encode(v, codec, engine=engine)  # type: ignore[arg-type]
        with pytest.raises(DecodeError, match=r"^Value: engine='fastbinary' declined the input: .* within 64 nested"):
            thrift.decode(raw, m.Value, codec, engine=engine)  # type: ignore[arg-type]
    else:
        assert thrift.encode(v, codec, engine=engine) == raw  # type: ignore[arg-type]
        assert_same_model(thrift.decode(raw, m.Value, codec, engine=engine), v)  # type: ignore[arg-type]


def test_the_c_codec_limit_is_what_we_assume() -> None:
    assert fast.encode(_deep_value(FAST_STRUCT_DEPTH - 1), "compact")
    with pytest.raises(Exception, match="recursion depth"):
        fast.encode(_deep_value(FAST_STRUCT_DEPTH), "compact")


def test_an_engine_is_named_from_the_list() -> None:
    with pytest.raises(ValueError, match=r"^unknown Thrift engine 'cython': expected one of 'fastbinary', 'python'$"):
        thrift.decode(b"", m.Value, "compact", engine="cython")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^unknown Thrift engine 'c'"):
        thrift.encode(m.Value(as_int=1), "compact", engine="c")  # type: ignore[arg-type]


def test_fastbinary_alone_declines_nesting_max_depth_keeps_from_it() -> None:
    raw = thrift.encode(m.Value(as_int=1), "compact")
    with pytest.raises(
        DecodeError,
        match=r"^Value: engine='fastbinary' declined the input: it reads nesting only within max_depth >= \d+ \(got 3\); leave `engine` unset",
    ):
        thrift.decode(raw, m.Value, "compact", max_depth=3, engine="fastbinary")
    assert thrift.decode(raw, m.Value, "compact", max_depth=3, engine="python") == m.Value(as_int=1)


def test_non_finite_doubles_are_real_doubles() -> None:
    for x, wire in ((float("inf"), b"\x00\x00\x00\x00\x00\x00\xf0\x7f"), (float("-inf"), b"\x00" * 6 + b"\xf0\xff")):
        raw = thrift.encode(m.Value(as_float=x), "compact", framed=False)
        assert wire in raw
        assert thrift.decode(raw, m.Value, "compact").as_float == x
    nan = thrift.decode(thrift.encode(m.Value(as_float=float("nan")), "binary"), m.Value, "binary").as_float
    assert nan is not None and nan != nan


def test_unknown_fields_are_skipped() -> None:
    # TensorArgument{name="x"} with an unknown field id 99 (a list of two i64) before the known one
    raw = b"\x0f\x00\x63\x0a\x00\x00\x00\x02" + b"\x00" * 16 + b"\x0b\x00\x0a\x00\x00\x00\x01x\x00"
    assert thrift.decode(raw, m.TensorArgument, "binary") == m.TensorArgument(name="x")


def test_fields_in_any_order_are_read() -> None:
    raw = thrift.encode(m.Device(type="cuda", index=1), "binary", framed=False)
    swapped = raw[11:-1] + raw[:11] + b"\x00"  # the i64 `index` field (11 bytes) before `type`
    assert thrift.decode(swapped, m.Device, "binary") == m.Device(type="cuda", index=1)


# ------------------------------------------------------------------------------------------ golden bytes

_GOLDEN_VALUES = {
    "device": m.Device(type="cuda", index=1),
    "argument_ints": m.Argument(as_ints=[1, -2, 300]),
    "symint_expr": m.SymInt(as_expr=m.SymExpr(expr_str="s0 + 1", hint=m.SymExprHint(as_int=4))),
    "named_argument": m.NamedArgument(name="alpha", arg=m.Argument(as_float=0.5), kind=m.ArgumentKind.KEYWORD),
    "value_dict": m.Value(as_dict={"b": m.Value(as_bool=True), "n": m.Value(as_none=True)}),
}


@pytest.mark.parametrize("key", sorted(_GOLDEN_VALUES))
def test_golden_bytes(key: str, codec: str, engine: str) -> None:
    got = thrift.encode(_GOLDEN_VALUES[key], codec, engine=engine)  # type: ignore[arg-type]
    want = check_golden(f"thrift/{key}.{codec}.hex", got)
    back = thrift.decode(want, type(_GOLDEN_VALUES[key]), codec, engine=engine)  # type: ignore[arg-type]
    assert back == _GOLDEN_VALUES[key]
