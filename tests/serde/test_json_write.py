"""The C JSON writer (serde/_cbuild_src/json_write.c, by `_cplan`'s plan) writes the reference bytes or declines.

What it takes, it writes exactly as `json.dumps(to_jsonable(model))` and the Python writers of `_json_write` do:
the corpus as torch wrote it, every type the strategies draw, edge strings, numbers and binary. What it does not
expect (a wrong type, a bool where an int belongs, a union with other than one member, a null in a required
field, a model of another class), it declines, and `opwire.dumps` writes or refuses it the reference way.
"""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from support import corpus
from support.typed import MODEL_NAMES, strategy_for

import opwire
from opwire.schema import models as m
from opwire.serde import EncodeError, _cplan
from opwire.serde._json_write import json_writers
from opwire.serde.json import to_jsonable


def _reference(obj: BaseModel) -> bytes:
    return json.dumps(to_jsonable(obj), allow_nan=False).encode()


def test_the_c_writer_writes_the_corpus_as_torch(corpus_program: corpus.SerializedProgram) -> None:
    program = opwire.loads(corpus_program.json_bytes, m.ExportedProgram)
    assert _cplan.json_write(program) == corpus_program.json_bytes


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(name=st.sampled_from(MODEL_NAMES), data=st.data())
def test_the_c_writer_writes_every_type_as_the_reference(name: str, data: st.DataObject) -> None:
    obj = data.draw(strategy_for(name))
    written = _cplan.json_write(obj)
    assert written is not None, f"the C writer declined a valid {name}: {obj!r}"
    assert written == _reference(obj) == json_writers()[name](obj).encode()


_TEXTS = ["", "plain", 'q"uote\\back', "\x00\x01\x1f\x7f", "\b\f\n\r\t/", "é", "\u2028€", "\U0001f600", "\ud800",
          "\udfff\ud83d", "\uffff\U0010ffff", "a" * 5000 + "\n"]  # fmt: skip
_DOUBLES = [0.0, -0.0, 1.0, 0.1, 1e16, 1e-7, 5e-324, 1.7976931348623157e308, -2.5, math.inf, -math.inf, math.nan]
_INTS = [0, -1, 2**63 - 1, -(2**63), 2**63, -(2**64) - 5, 10**30, m.ArgumentKind.POSITIONAL]  # taken as int.__repr__
_BINARIES = [b"", b"\x00", b"ab", b"abc", b"\xff" * 4, bytes(range(256))]


def _tensor(**update: object) -> m.TensorValue:
    """A TensorValue with `update` in its `__dict__` (unchecked: as a user's code may leave it)."""
    device = m.Device(type="cpu", index=None)
    fields = {"dtype": m.ScalarType.FLOAT, "sizes": [], "strides": [], "storage_offset": 0, "device": device,
              "requires_grad": False, "padding": None, "data": b""}  # fmt: skip
    return m.TensorValue.model_construct(**(fields | update))


@pytest.mark.parametrize(
    "obj",
    [
        *[m.TensorArgument(name=t) for t in _TEXTS],
        m.Node.model_construct(target="t", inputs=[], outputs=[], metadata=dict.fromkeys(_TEXTS, "\u0394"), name=None),
        *[m.ComplexValue.model_construct(real=d, imag=-d) for d in _DOUBLES],
        *[m.SymInt.model_construct(as_int=i, _fields_set={"as_int"}) for i in _INTS],
        *[_tensor(data=b) for b in _BINARIES],
    ],
    ids=lambda obj: repr(obj)[:80],
)  # fmt: skip
def test_the_c_writer_writes_edge_values_as_the_reference(obj: BaseModel) -> None:
    assert _cplan.json_write(obj) == _reference(obj) == opwire.dumps(obj)


class _Str(str):
    pass


class _Float(float):
    pass


def _two_members() -> m.SymInt:
    obj = m.SymInt(as_int=1)
    object.__setattr__(obj, "__pydantic_fields_set__", {"as_int", "as_expr"})
    return obj


def _missing_field() -> m.Device:
    obj = m.Device(type="cpu", index=1)
    del obj.__dict__["index"]
    return obj


_DECLINED = [
    m.SymInt.model_construct(as_int=True),  # a bool where an int belongs
    m.SymInt.model_construct(as_int=None),  # no member
    m.SymInt.model_construct(_fields_set=set()),  # no member set
    _two_members(),  # two members named as set
    m.SymInt.model_construct(as_int=1.0, _fields_set={"as_int"}),  # a float where an int belongs
    m.Device.model_construct(type=None),  # a null in a required field
    _missing_field(),  # a field missing from __dict__
    m.Device.model_construct(type=_Str("cpu"), index=None),  # a str subclass
    m.ComplexValue.model_construct(real=1, imag=2.0),  # an int where a double belongs
    m.ComplexValue.model_construct(real=_Float(1.0), imag=2.0),  # a float subclass
    m.TensorArgument.model_construct(name=b"x"),  # bytes where a string belongs
    _tensor(data="AA=="),  # a str where binary belongs
    _tensor(sizes=(1,)),  # a tuple where a list belongs
    _tensor(requires_grad=1),  # an int where a bool belongs
    m.Node.model_construct(target="t", inputs=[], outputs=[], metadata={1: "x"}, name=None),  # a key not a string
    m.Node.model_construct(target="t", inputs=[m.TensorArgument(name="x")], outputs=[], metadata={}, name=None),
    m.Argument.model_construct(as_tensor=m.TokenArgument(name="x"), _fields_set={"as_tensor"}),  # another class
    m.Argument.model_construct(as_bool="yes", _fields_set={"as_bool"}),
]


@pytest.mark.parametrize("obj", _DECLINED, ids=lambda obj: repr(obj)[:80])
def test_the_c_writer_declines_what_the_reference_path_decides(obj: BaseModel) -> None:
    assert _cplan.json_write(obj) is None
    try:
        expected = _reference(obj)
    except (ValueError, TypeError, EncodeError):  # the reference path refuses it: so does dumps, with its EncodeError
        with pytest.raises(EncodeError):
            opwire.dumps(obj)
    else:
        assert opwire.dumps(obj) == expected


def test_dumps_writes_with_the_python_writers_without_the_c_module(monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkout without the C module builds: `opwire.dumps` writes the same bytes with `_json_write`'s writers."""
    data = corpus.get_serialized(corpus.program_names()[0]).json_bytes
    program = opwire.loads(data, m.ExportedProgram)
    monkeypatch.setattr(_cplan, "AVAILABLE", False)
    monkeypatch.setattr(_cplan, "json_write", None)  # not asked
    assert opwire.dumps(program) == data
    for obj in _DECLINED:
        try:
            expected = _reference(obj)
        except (ValueError, TypeError, EncodeError):
            with pytest.raises(EncodeError):
                opwire.dumps(obj)
        else:
            assert opwire.dumps(obj) == expected
