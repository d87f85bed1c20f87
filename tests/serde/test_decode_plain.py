"""`thrift.decode_plain` (no model built) takes only what `thrift.decode` builds a model of, with the same values,
and charges a budget as `decode` charges it: checked on every type and on mutated encodings."""

from __future__ import annotations

import math
from enum import IntEnum
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from support.typed import MODEL_NAMES, strategy_for

from opwire.errors import DecodeError
from opwire.schema import models as m
from opwire.serde import budgets, thrift


def _same(plain: Any, model: Any) -> bool:
    """Whether a plain value holds what a model holds: every field, enums as their ints."""
    if isinstance(model, BaseModel):
        return all(_same(getattr(plain, f), getattr(model, f)) for f in type(model).model_fields)
    if isinstance(model, list):
        return type(plain) is list and len(plain) == len(model) and all(map(_same, plain, model))
    if isinstance(model, dict):
        return type(plain) is dict and plain.keys() == model.keys() and all(_same(plain[k], model[k]) for k in model)
    if isinstance(model, float) and math.isnan(model):
        return type(plain) is float and math.isnan(plain)
    kind = int if isinstance(model, IntEnum) else type(model)
    return type(plain) is kind and plain == model


def _both(data: bytes, name: str) -> tuple[Any, BaseModel | None]:
    """(decode_plain's value, decode's model or None where it refuses the bytes)."""
    cls = m.MODELS[name]
    plain = thrift.decode_plain(data, cls)
    try:
        return plain, thrift.decode(data, cls, "compact", framed=False)
    except DecodeError:
        return plain, None


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(name=st.sampled_from(MODEL_NAMES), data=st.data())
def test_every_type_reads_as_its_model(name: str, data: st.DataObject) -> None:
    obj = data.draw(strategy_for(name))
    plain, model = _both(thrift.encode(obj, "compact", framed=False), name)
    assert model is not None
    if plain is not None:  # None: a value the builders do not take (an expression), decode decides
        assert _same(plain, model)


@st.composite
def _mutated(draw: st.DrawFn) -> tuple[str, bytes]:
    name = draw(st.sampled_from(["TraceFrame", "CallRecord", "TraceTensor", "Argument", "NamedArgument"]))
    data = bytearray(thrift.encode(draw(strategy_for(name)), "compact", framed=False))
    for _ in range(draw(st.integers(1, 3))):
        pos = draw(st.integers(0, max(len(data) - 1, 0)))
        kind = draw(st.sampled_from(("flip", "splice", "delete", "truncate")))
        if kind == "flip" and data:
            data[pos] ^= draw(st.integers(1, 255))
        elif kind == "splice":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "delete":
            del data[pos : pos + draw(st.integers(1, 4))]
        else:
            del data[pos:]
    return name, bytes(data)


@settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(case=_mutated())
def test_what_it_takes_decode_builds_alike(case: tuple[str, bytes]) -> None:
    plain, model = _both(case[1], case[0])
    if plain is not None:
        assert model is not None and _same(plain, model)


def test_a_budget_is_charged_and_refused_as_decode_charges_it() -> None:
    value = m.TensorValue(
        dtype=m.ScalarType.FLOAT, sizes=[2, 3], strides=[3, 1], storage_offset=0, device=m.Device(type="cpu"),
        requires_grad=False, data=b"",
    )  # fmt: skip
    data = thrift.encode(m.TraceFrame(tensor=m.TraceTensor(name="t1", value=value)), "compact", framed=False)
    plain_budget, model_budget = budgets.Budget(100), budgets.Budget(100)
    plain = thrift.decode_plain(data, m.TraceFrame, max_elements=plain_budget)
    model = thrift.decode(data, m.TraceFrame, "compact", framed=False, max_elements=model_budget)
    assert _same(plain, model) and plain_budget.spent == model_budget.spent > 5
    messages = []
    for read in (
        lambda b: thrift.decode_plain(data, m.TraceFrame, source="f@3", max_elements=b),
        lambda b: thrift.decode(data, m.TraceFrame, "compact", framed=False, source="f@3", max_elements=b),
    ):
        with pytest.raises(DecodeError) as caught:
            read(budgets.Budget(5))
        messages.append(str(caught.value))
    assert messages[0] == messages[1] and "exceeds the budget max_elements=5" in messages[0]


def test_a_padded_archive_is_left_to_decode() -> None:
    """An archive's paddings are checked and dropped by `decode` (serde/_padding.py); `decode_plain` declines them."""
    import torch

    from opwire.serde import torch_bridge

    archive = torch_bridge.archive_from_exported_program(torch.export.export(torch.nn.Linear(2, 3), (torch.ones(2),)))
    data = thrift.encode(archive, "compact", framed=False)
    decoded = thrift.decode(data, m.OpwireArchive, "compact", framed=False)
    assert decoded.weights and all(tv.padding is None for tv in decoded.weights.values())
    assert thrift.decode_plain(data, m.OpwireArchive) is None
