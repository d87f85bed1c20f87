"""JSON codec: round trip of every model type, agreement with torch's own JSON writer and with model_dump_json."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.typed import MODEL_NAMES, assert_same_model, strategy_for
from torch._export.serde import schema as torch_schema
from torch._export.serde.serialize import _dict_to_dataclass, _to_json_bytes

import opwire
from opwire.schema import models as m

_SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TORCH_TYPES = {n for n in MODEL_NAMES if m.SCHEMA.structs[n].module == "export_schema"}


@pytest.mark.parametrize("name", MODEL_NAMES)
@_SETTINGS
@given(data=st.data())
def test_round_trip_every_type(name: str, data: st.DataObject) -> None:
    """Each drawn value: dumps -> loads -> dumps; torch's dataclasses read it and write the very same bytes back (torch's
    types); pydantic's model_dump_json is the same document (docs/wire-format.md: keys, order and values; only
    dumps() has torch's bytes). One draw serves the three checks."""
    obj = data.draw(strategy_for(name))
    raw = opwire.dumps(obj)
    back = opwire.loads(raw, m.MODELS[name])
    assert_same_model(obj, back)
    assert opwire.dumps(back) == raw
    if name in TORCH_TYPES:
        assert _to_json_bytes(_dict_to_dataclass(getattr(torch_schema, name), json.loads(raw))) == raw
    ours = json.loads(raw)
    pydantics = json.loads(obj.model_dump_json())
    assert pydantics == ours and json.dumps(pydantics) == json.dumps(ours)  # equal, keys in the same order
    assert obj.model_dump(mode="json") == ours
    assert_same_model(opwire.loads(obj.model_dump_json(), type(obj)), obj)


def test_model_dump_writes_single_key_unions() -> None:
    arg = m.Argument(as_ints=[1, 2])
    assert arg.model_dump() == {"as_ints": [1, 2]}
    assert arg.type == "as_ints" and arg.value == [1, 2]
