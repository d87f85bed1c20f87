"""`thrift.decode_plain`'s two engines give one answer: the C module's one pass (`_cbuild_src/thrift_plain.c`) and,
where the module is not built, fastbinary's decode, re-encode and count (`_thrift/fast.py`). Held on real trace
frames and random models, mutated, at several budgets (the value, its type and every field set, the budget charged,
the error), and on each reason to decline."""

from __future__ import annotations

import struct
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.typed import MODEL_NAMES, mutate_bytes, strategy_for

import opwire
from opwire.errors import DecodeError
from opwire.recording.stream_frames import FRAME
from opwire.schema import models as m
from opwire.serde import _cplan, budgets, thrift
from opwire.serde._thrift import fast

_LIMITS = [None, 0, 1, 3, 20, 10**9]


def _outcome(data: bytes, name: str, codec: str, limit: int | None, c: bool) -> tuple[Any, ...]:
    """What `decode_plain` does with one engine: ("none",), ("value", value, spent) or ("error", message, spent)."""
    budget = None if limit is None else budgets.Budget(limit)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_cplan, "AVAILABLE", c)
        if c:  # the C module serves alone: the fastbinary path is not asked
            patch.setattr(fast, "decode_plain", None)
            patch.setattr(fast, "count_values", None)
        try:
            value = thrift.decode_plain(data, m.MODELS[name], codec, source="f@1", max_elements=budget)
        except DecodeError as exc:
            return ("error", str(exc), budget and budget.spent)
    return ("none",) if value is None else ("value", value, budget and budget.spent)


def _identical(a: Any, b: Any) -> bool:
    """Same types all the way down, same fields set in the same order, floats bit for bit."""
    if type(a) is not type(b):
        return False
    if isinstance(a, SimpleNamespace):
        mine, theirs = vars(a), vars(b)
        return list(mine) == list(theirs) and all(_identical(mine[k], theirs[k]) for k in mine)
    if isinstance(a, list):
        return len(a) == len(b) and all(map(_identical, a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_identical(a[k], b[k]) for k in a)
    if isinstance(a, float):
        return struct.pack("<d", a) == struct.pack("<d", b)
    return bool(a == b)


def _agree(data: bytes, name: str, codec: str, limit: int | None) -> tuple[Any, ...]:
    ours, theirs = _outcome(data, name, codec, limit, True), _outcome(data, name, codec, limit, False)
    assert ours[0] == theirs[0], f"{codec} {name} limit {limit}: C {ours[0]}, fastbinary {theirs[0]}: {data[:200]!r}"
    if ours[0] == "value":
        assert _identical(ours[1], theirs[1]) and ours[2] == theirs[2], f"{codec} {name}: {ours} != {theirs}"
    else:
        assert ours == theirs
    return ours


_SPLICES = [b"\x00", b"\x01", b"\x02", b"\x80", b"\x7f\xff\xff\xff", b"\xff\xff\xff\xff\x0f"]


def _mutate(data: bytes, draw: st.DrawFn) -> bytes:
    return mutate_bytes(data, draw, _SPLICES, 40)


@st.composite
def _models(draw: st.DrawFn) -> tuple[str, str, bytes]:
    name, codec = draw(st.sampled_from(MODEL_NAMES)), draw(st.sampled_from(("binary", "compact")))
    payload = fast.encode(draw(strategy_for(name)), codec)
    return name, codec, _mutate(payload, draw) if draw(st.booleans()) else payload


@settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(case=_models(), limit=st.sampled_from(_LIMITS))
def test_random_models_mutated_read_alike(case: tuple[str, str, bytes], limit: int | None) -> None:
    _agree(case[2], case[0], case[1], limit)


@pytest.fixture(scope="module")
def frames(tmp_path_factory: pytest.TempPathFactory) -> list[bytes]:
    """The TraceFrame bodies of a recorded training step (records, tensors, schemas, header, frees, trailer)."""
    path = tmp_path_factory.mktemp("plain") / "mlp.trace"
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with opwire.record(path=path):
        loss = torch.nn.functional.mse_loss(model(torch.randn(4, 6)), torch.zeros(4, 3))
        loss.backward()
        opt.step()
        torch.cat([torch.arange(3.0), torch.full((2,), float("nan"))]).to(torch.int64).max(dim=0)
    data = path.read_bytes()
    pos, out = 19 + len("TraceFrame"), []
    while pos < len(data):
        kind, size, _ = FRAME.unpack_from(data, pos)
        if kind != b"P":
            out.append(data[pos + FRAME.size : pos + FRAME.size + size])
        pos += FRAME.size + size
    assert len(out) > 50
    return out


@pytest.mark.parametrize("codec", ["compact", "binary"])
def test_every_real_frame_reads_alike_at_every_budget(frames: list[bytes], codec: str) -> None:
    kinds = set()
    for body in frames:
        data = body if codec == "compact" else fast.encode(thrift.decode(body, m.TraceFrame, framed=False), codec)
        for limit in _LIMITS:
            got = _agree(data, "TraceFrame", codec, limit)
            if limit in (None, 10**9):
                assert got[0] == "value"
                kinds.add(next(iter(vars(got[1]))))
    assert {"header", "op_schema", "tensor", "record", "freed", "trailer"} <= kinds


@settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(data=st.data(), limit=st.sampled_from(_LIMITS))
def test_real_frames_mutated_read_alike(frames: list[bytes], data: st.DataObject, limit: int | None) -> None:
    body = _mutate(data.draw(st.sampled_from(frames)), data.draw)
    _agree(body, "TraceFrame", "compact", limit)


def _tensor(**changes: Any) -> m.TensorValue:
    fields: dict[str, Any] = dict(
        dtype=m.ScalarType.FLOAT, sizes=[2, 3, 4, 5, 6], strides=[360, 120, 30, 6, 1], storage_offset=0,
        device=m.Device(type="cpu"), requires_grad=False, data=b"",
    )  # fmt: skip
    return m.TensorValue(**{**fields, **changes})


def _declined(data: bytes, name: str, codec: str = "compact") -> None:
    for limit in (None, 10**9):
        assert _agree(data, name, codec, limit) == ("none",)


@pytest.mark.parametrize("codec", ["compact", "binary"])
def test_each_reason_to_decline(codec: str) -> None:
    sym = fast.encode(m.SymInt(as_int=3), codec)
    assert _agree(sym, "SymInt", codec, None)[0] == "value"
    _declined(sym + b"\x00", "SymInt", codec)  # a byte left over
    _declined(sym[:-1], "SymInt", codec)  # cut
    _declined(b"\x00", "SymInt", codec)  # a union of no member
    both = fast.encode(m.Argument(as_int=1), codec)[:-1] + fast.encode(m.Argument(as_float=2.0), codec)
    _declined(both, "Argument", codec)  # a union of two members
    _declined(b"\x00", "Device", codec)  # a required field missing
    _declined(fast.encode(m.SymInt(as_expr=m.SymExpr(expr_str="s0")), codec), "SymInt", codec)  # an expression
    padded = m.TraceFrame(tensor=m.TraceTensor(name="t", value=_tensor(padding=b"\x00" * 8)))
    _declined(fast.encode(padded, codec), "TraceFrame", codec)  # settled after the build: decode decides
    graph = fast.encode(m.Graph(inputs=[], outputs=[], nodes=[], tensor_values={}, sym_int_values={},
                                sym_bool_values={}), codec)  # fmt: skip
    assert _agree(graph, "Graph", codec, None)[0] == "value"
    last = b"\xab\x00" if codec == "compact" else b"\x0d\x00\x5a\x0b\x0c\x00\x00\x00\x00"  # sym_float_values {}
    assert graph.endswith(last + b"\x00")
    _declined(graph[: -len(last) - 1] + b"\x00", "Graph", codec)  # left out, its default ({}) would be written
    deep = m.Argument(as_int=1)
    for _ in range(70):  # deeper than 64 structs: the checking decoder's
        deep = m.Argument(as_string_to_argument={"a": deep})
    _declined(thrift.encode(deep, codec, framed=False), "Argument", codec)
    tensor = fast.encode(_tensor(), codec)
    assert _agree(tensor, "TensorValue", codec, None)[0] == "value"
    dtype = tensor.index(b"\xa5\x0e" if codec == "compact" else b"\x08\x00\x0a\x00\x00\x00\x07")
    unknown = b"\xa5\xce\x0f" if codec == "compact" else b"\x08\x00\x0a\x00\x00\x03\xe7"
    size = 2 if codec == "compact" else 7
    _declined(tensor[:dtype] + unknown + tensor[dtype + size :], "TensorValue", codec)  # ScalarType 999


def test_non_canonical_bytes_are_declined() -> None:
    assert fast.encode(m.SymInt(as_int=3), "compact") == b"\x06\x28\x06\x00"  # as_int (id 20: the long form) = 3
    _declined(b"\x06\x28\x86\x00\x00", "SymInt")  # a varint with a trailing zero group
    _declined(b"\x05\x28\x06\x00", "SymInt")  # an i32 code where the IDL says i64
    _declined(b"\x16\x06\x00", "SymInt")  # an unknown field id (1)
    _declined(b"\x06\x14\x06\x00", "SymInt")  # id 10 in the long form (the short one fits)
    device = fast.encode(m.Device(type="cpu", index=1), "compact")
    assert _agree(device, "Device", "compact", None)[0] == "value"
    _declined(device.replace(b"cpu", b"c\xffu"), "Device")  # invalid UTF-8
    _declined(device[:1] + b"\x83\x00" + device[2:], "Device")  # a length not minimal
    flag = fast.encode(m.Argument(as_bool=True), "compact")
    _declined(b"\x03" + flag[1:], "Argument")  # an i8 code where the IDL says bool
    flag = fast.encode(m.Argument(as_bool=True), "binary")
    assert flag[-2:] == b"\x01\x00" and _agree(flag, "Argument", "binary", None)[0] == "value"
    _declined(flag[:-2] + b"\x02\x00", "Argument", "binary")  # a bool byte that is neither 1 nor 0


def test_a_budget_is_met_first_by_a_long_list_or_by_a_struct() -> None:
    """fastbinary's count charges a struct when it ends and refuses a list longer than the budget at its header:
    whichever comes first decides (a long list: declined; past the budget: refused)."""
    long_first = fast.encode(m.TraceFrame(tensor=m.TraceTensor(name="t", value=_tensor())), "compact")
    assert _agree(long_first, "TraceFrame", "compact", 4) == ("none",)  # sizes (5 items) before any struct ends
    assert _agree(long_first, "TraceFrame", "compact", 5)[0] == "error"  # no list past 5; TensorValue ends at 19
    spent = _agree(long_first, "TraceFrame", "compact", 10**9)[2]
    assert _agree(long_first, "TraceFrame", "compact", spent)[2] == spent
    assert _agree(long_first, "TraceFrame", "compact", spent - 1)[0] == "error"
    short = fast.encode(m.SymInt(as_int=3), "compact")
    assert _agree(short, "SymInt", "compact", 1)[0] == "error"  # its one struct ends past 1
    assert _agree(short, "SymInt", "compact", 2)[2] == 2


def test_what_may_be_left_out_is_the_same_for_both_engines() -> None:
    """A field the C plan lets the wire leave out is one whose `_plain` default is None (and is not required): the
    re-encode of the fastbinary path writes back exactly those absent fields as nothing."""
    classes = fast.plain_classes()
    tables = _cplan._Tables()
    for name in m.MODELS:
        if name not in classes:
            continue
        row = tables.struct(name)
        assert row[6] is classes[name]
        for field_name, _, required, _, _, _, _, absent_ok in row[2]:
            info = m.MODELS[name].model_fields[field_name]
            assert absent_ok == (not required and info.get_default(call_default_factory=True) is None)
            assert required == info.is_required()
