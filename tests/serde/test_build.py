"""The code compiled from the IDL agrees with the reference paths it stands in for.

Builders (serde/_build.py, and the C builder driven by serde/_cplan.py): whatever a builder accepts, pydantic accepts too and builds the same model: the same
values of the same types, the same `__pydantic_fields_set__`, no extra, no private. What a builder declines,
pydantic decides (and words the error). Checked on the corpus, a table of edge values and mutated documents of
every type; the Thrift builders count values as fastbinary's counting pass does. Writers (serde/_json_write.py):
the same text as `json.dumps(to_jsonable(...))` for every type, and nothing for models they do not expect.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError
from pydantic_core import from_json
from support import corpus
from support.typed import MODEL_NAMES, assert_identical, strategy_for

import opwire
from opwire.schema import models as m
from opwire.serde import EncodeError, _cplan
from opwire.serde._build import Builders, json_builders
from opwire.serde._json_write import json_writers
from opwire.serde._thrift import fast
from opwire.serde.json import to_jsonable


def _agree(name: str, data: bytes) -> bool:
    """Assert the builders of `name` (Python, and C: `_cplan`, which the tests run with) build what pydantic
    validates from `data`, or both decline; True if they built."""
    cls = m.MODELS[name]
    try:
        built = json_builders()[name](from_json(data))
    except Exception:
        built = None
    try:
        c_built = _cplan.json_build(name, from_json(data))
    except ValueError:  # invalid JSON
        c_built = None
    assert (built is None) == (c_built is None), f"one builder took what the other declines: {data[:300]!r}"
    c_parsed = _cplan.json_build(name, data)  # the C module's own parser: strict, may decline more
    try:
        reference = cls.model_validate_json(data)
    except ValidationError:
        assert built is None, f"the builder took what pydantic refuses: {data[:300]!r}"
        assert c_parsed is None, f"the C parser and builder took what pydantic refuses: {data[:300]!r}"
        return False
    if built is not None:
        assert_identical(built, reference)
        assert_identical(c_built, reference)
    if c_parsed is not None:
        assert_identical(c_parsed, reference)
    return built is not None


@pytest.mark.parametrize("name", corpus.program_names())
def test_corpus_programs_build_as_pydantic_validates(name: str) -> None:
    assert _agree("ExportedProgram", corpus.get_serialized(name).json_bytes)


def _tensor_meta(**changes: Any) -> bytes:
    meta: dict[str, Any] = {
        "dtype": 7,
        "sizes": [{"as_int": 2}],
        "requires_grad": False,
        "device": {"type": "cpu", "index": None},
        "strides": [{"as_int": 1}],
        "storage_offset": {"as_int": 0},
        "layout": 7,
    }
    for k, v in changes.items():
        if v is _DROP:
            del meta[k]
        else:
            meta[k] = v
    return json.dumps(meta).encode()


def _tensor_value(data: str) -> bytes:
    value = {"dtype": 1, "sizes": [3], "strides": [1], "storage_offset": 0, "device": {"type": "cpu"}}
    value |= {"requires_grad": False, "data": data}
    return json.dumps(value).encode()


_DROP = object()
_EDGES = [
    ("ComplexValue", b'{"real": 1, "imag": 2.5}', True),  # an int for a double: 1.0
    ("ComplexValue", b'{"real": "Infinity", "imag": "NaN"}', True),
    ("ComplexValue", b'{"real": "-Infinity", "imag": -0.0}', True),
    ("ComplexValue", b'{"real": true, "imag": 2.5}', False),
    ("ComplexValue", b'{"real": "inf", "imag": 2.5}', False),
    ("ComplexValue", b'{"real": 1, "imag": 2, "extra": [1, {"a": null}]}', True),  # unknown keys ignored
    ("SymInt", b'{"as_int": 9223372036854775807}', True),
    ("SymInt", b'{"as_int": 9223372036854775808}', False),
    ("SymInt", b'{"as_int": 1.0}', False),
    ("SymInt", b'{"as_int": true}', False),
    ("SymInt", b'{"as_int": null}', False),
    ("SymInt", b'{"as_int": 1, "as_expr": null}', None),  # pydantic takes it (fields set: both)
    ("SymInt", b'{"as_int": 1, "as_expr": {"expr_str": "s0"}}', False),
    ("SymInt", b'{"as_nothing": 1}', False),
    ("SymInt", b"{}", False),
    ("SymInt", b"[]", False),
    ("SymExpr", b'{"expr_str": "s0 + 1", "hint": null}', True),
    ("SymExpr", b'{"expr_str": "__import__(\\"os\\")"}', False),
    ("Device", b'{"type": "cpu"}', True),  # index defaults to None: fields set {type}
    ("Device", b'{"type": "cpu", "index": null, "type": "cuda"}', True),  # the last duplicate wins
    ("Device", b'{"type": 1}', False),
    ("TensorMeta", _tensor_meta(), True),
    ("TensorMeta", _tensor_meta(dtype=7.0), None),  # pydantic's JSON enum takes 7.0: the builder may decline
    ("TensorMeta", _tensor_meta(dtype=True), None),
    ("TensorMeta", _tensor_meta(dtype=999), False),
    ("TensorMeta", _tensor_meta(sizes=None), False),
    ("TensorMeta", _tensor_meta(sizes={"0": {"as_int": 1}}), False),
    ("TensorMeta", _tensor_meta(layout=_DROP), False),
    ("TensorMeta", _tensor_meta(requires_grad=0), False),
    (
        "Graph",
        b'{"inputs": [], "outputs": [], "nodes": [], "tensor_values": {}, "sym_int_values": {}, "sym_bool_values": {}}',
        True,
    ),  # default factories: fresh dicts
    ("TensorValue", _tensor_value("AAEC"), True),
    ("TensorValue", _tensor_value("A=="), False),
    ("TensorValue", _tensor_value("AA EC"), False),
]


@pytest.mark.parametrize(("name", "data", "builds"), _EDGES)
def test_edge_values_build_as_pydantic_validates(name: str, data: bytes, builds: bool | None) -> None:
    built = _agree(name, data)
    if builds is not None:
        assert built is builds


def test_defaults_are_fresh_per_model() -> None:
    doc = (
        b'{"inputs": [], "outputs": [], "nodes": [], "tensor_values": {}, "sym_int_values": {}, "sym_bool_values": {}}'
    )
    a, b = (opwire.loads(doc, m.Graph) for _ in range(2))
    assert a.custom_obj_values == {} and a.custom_obj_values is not b.custom_obj_values


_ODD = [None, True, False, 0, -1, 1.5, 2**63, -(2**63) - 1, "", "x", "Infinity", [], {}, [None], {"a": 1}]


def _mutate(value: Any, draw: st.DrawFn) -> Any:
    """`value` (parsed JSON) with one leaf, key or element changed into something odd."""
    if isinstance(value, dict) and value:
        key = draw(st.sampled_from(sorted(value)))
        what = draw(st.sampled_from(("deeper", "replace", "drop", "add")))
        out = dict(value)
        if what == "deeper":
            out[key] = _mutate(value[key], draw)
        elif what == "replace":
            out[key] = draw(st.sampled_from(_ODD))
        elif what == "drop":
            del out[key]
        else:
            out[draw(st.sampled_from(("as_int", "as_none", "name", "zzz")))] = draw(st.sampled_from(_ODD))
        return out
    if isinstance(value, list) and value:
        i = draw(st.integers(0, len(value) - 1))
        return [*value[:i], _mutate(value[i], draw), *value[i + 1 :]]
    return draw(st.sampled_from(_ODD))


@st.composite
def _documents(draw: st.DrawFn) -> tuple[str, bytes]:
    name = draw(st.sampled_from(MODEL_NAMES))
    doc = json.loads(opwire.dumps(draw(strategy_for(name))))
    for _ in range(draw(st.integers(0, 3))):
        doc = _mutate(doc, draw)
    return name, json.dumps(doc).encode()


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(case=_documents())
def test_mutated_documents_build_as_pydantic_validates(case: tuple[str, bytes]) -> None:
    _agree(*case)


def _thrift_count(obj: BaseModel, codec: str) -> tuple[int | None, int | None]:
    """(values the building fast path counts, values fastbinary's counting pass counts) of `obj` in `codec`."""
    payload = fast.encode(obj, codec)
    name = type(obj).__name__
    built = fast.decode(payload, 0, name, codec, 10**9)
    return (None if built is None else built[1]), fast.count_values(payload, 0, name, codec, 10**9)


@pytest.mark.parametrize("codec", ["binary", "compact"])
def test_thrift_builders_count_as_the_counting_pass(codec: str) -> None:
    program = opwire.loads(corpus.get_serialized(corpus.program_names()[0]).json_bytes, m.ExportedProgram)
    built, counted = _thrift_count(program, codec)
    assert built == counted and built is not None and built > 100


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(name=st.sampled_from(MODEL_NAMES), data=st.data())
def test_thrift_builders_count_every_type_as_the_counting_pass(name: str, data: st.DataObject) -> None:
    obj = data.draw(strategy_for(name))
    built, counted = _thrift_count(obj, "compact")
    if built is not None:  # None: fastbinary declines (deep nesting), the checking decoder counts then
        assert built == counted


def _reference_json(obj: BaseModel) -> str:
    return json.dumps(to_jsonable(obj), allow_nan=False)


@pytest.mark.parametrize("name", corpus.program_names())
def test_writers_write_the_corpus_as_torch(name: str) -> None:
    data = corpus.get_serialized(name).json_bytes
    program = opwire.loads(data, m.ExportedProgram)
    assert json_writers()["ExportedProgram"](program).encode() == data


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(name=st.sampled_from(MODEL_NAMES), data=st.data())
def test_writers_write_every_type_as_the_reference(name: str, data: st.DataObject) -> None:
    obj = data.draw(strategy_for(name))
    assert json_writers()[name](obj) == _reference_json(obj)


@pytest.mark.parametrize(
    "obj",
    [
        m.SymInt.model_construct(as_int=True),  # a bool where an int belongs
        m.SymInt.model_construct(as_int=None),  # no member
        m.Device.model_construct(type=None),
        m.ComplexValue.model_construct(real=1, imag=2.0),  # an int where a double belongs
        m.TensorArgument.model_construct(name=b"x"),
    ],
    ids=repr,
)
def test_writers_decline_what_the_reference_path_decides(obj: BaseModel) -> None:
    with pytest.raises(Exception):  # noqa: B017 - any: the caller falls back on every exception
        json_writers()[type(obj).__name__](obj)
    try:
        expected = _reference_json(obj).encode()
    except (ValueError, TypeError):  # the reference path refuses it: so does dumps, with its EncodeError
        with pytest.raises(EncodeError):
            opwire.dumps(obj)
    else:
        assert opwire.dumps(obj) == expected


def test_builders_compile_once_per_root_under_threads() -> None:
    builders = Builders("json")  # a fresh set: the first use of each root compiles, in several threads at once
    docs = {
        "ExportedProgram": corpus.get_serialized(corpus.program_names()[0]).json_bytes,
        "Device": b'{"type": "cpu", "index": 1}',
        "Argument": b'{"as_tensors": [{"name": "x"}]}',
        "SymInt": b'{"as_int": 3}',
    }
    with ThreadPoolExecutor(8) as pool:
        built = list(pool.map(lambda name: (name, builders[name](from_json(docs[name]))), list(docs) * 4))
    for name, obj in built:
        assert_identical(obj, m.MODELS[name].model_validate_json(docs[name]))
    with pytest.raises(KeyError):
        builders["NoSuchStruct"]
