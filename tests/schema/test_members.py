"""One table of what each union member carries, read off the IDL; a new member cannot fall through."""

from __future__ import annotations

import pytest
import torch

from opwire.errors import EncodeError
from opwire.schema import members
from opwire.schema import models as m
from opwire.schema.idl import TypeRef
from opwire.schema.members import ARGUMENT, VALUE, Carrier, members_carrying
from opwire.serde.python_carriers import carrier_of, python_of, to_member, value_of


def test_every_member_of_argument_and_value_is_classified_in_idl_order() -> None:
    assert list(ARGUMENT) == [f.name for f in m.SCHEMA.structs["Argument"].fields]
    assert list(VALUE) == [f.name for f in m.SCHEMA.structs["Value"].fields]
    assert ARGUMENT["as_sym_ints"] == Carrier("list", Carrier("symbolic", Carrier("int")))
    assert ARGUMENT["as_nested_tensors"].spelled == "list[list[tensor]]"
    assert members_carrying(Carrier("list", Carrier("tensor"))) == ("as_tensors",)


def test_a_type_the_table_does_not_know_is_refused_at_import_time() -> None:
    with pytest.raises(AssertionError, match=r"does not classify Argument.as_new: NewThing; add its kind"):
        members._classify(TypeRef(kind="struct", name="NewThing"), "Argument.as_new")


@pytest.mark.parametrize(
    ("value", "spelled"),
    [
        (None, "none"),
        (True, "bool"),
        (3, "int"),
        (2.5, "float"),
        (1j, "complex"),
        ("s", "string"),
        (torch.ones(1), "tensor"),
        (torch.float16, "dtype"),
        (torch.strided, "layout"),
        (torch.channels_last, "memory_format"),
        (torch.device("cpu"), "device"),
        ([], "list[int]"),
        ([1, 2.0], "list[float]"),
        ([torch.ones(1), None], "list[optional_tensor]"),
        ([[torch.ones(1)]], "list[list[tensor]]"),
    ],
)
def test_python_values_map_to_carriers(value: object, spelled: str) -> None:
    carrier = carrier_of(value)
    assert carrier is not None and carrier.spelled == spelled


def test_every_value_member_round_trips_through_python() -> None:
    samples = [
        None,
        True,
        7,
        1.5,
        2 + 3j,
        "x",
        torch.arange(6).reshape(2, 3),
        torch.device("cpu"),
        torch.bfloat16,
        torch.sparse_coo,
        torch.channels_last,
        [1, "a"],
        {"k": [None]},
    ]
    seen = set()
    for obj in samples:
        v = value_of(obj)
        seen.add(v.type)
        back = python_of(v)
        if isinstance(obj, torch.Tensor):
            assert torch.equal(back, obj)
        else:
            assert back == obj
    assert seen == set(VALUE)


def test_member_converters_name_their_path() -> None:
    with pytest.raises(EncodeError, match=r"Expected a Layout the export schema names, got torch.jagged - at `x`"):
        to_member("Argument", "as_layout")(torch.jagged, "x", None)
    with pytest.raises(EncodeError, match="got object - at `v`"):
        value_of(object(), "v")
