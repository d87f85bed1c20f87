"""The InputSpec/OutputSpec table (schema/spec_roles.py) covers the IDL and answers for real programs."""

from __future__ import annotations

import pytest

from opwire.schema import models as m
from opwire.schema import spec_roles as specs
from opwire.schema.models import SCHEMA


def test_every_idl_member_has_an_entry() -> None:
    assert list(specs.INPUT) == [f.name for f in SCHEMA.structs["InputSpec"].fields]
    assert list(specs.OUTPUT) == [f.name for f in SCHEMA.structs["OutputSpec"].fields]


def test_targets_come_from_the_idl() -> None:
    assert specs.INPUT["parameter"].target_field == "parameter_name"
    assert specs.INPUT["buffer"].target_field == "buffer_name"
    assert specs.INPUT["constant_input"].graph_field == "name"
    assert specs.OUTPUT["user_input_mutation"].target_field == "user_input_name"
    assert specs.INPUT["user_input"].target_field is None


def test_names_of_specs() -> None:
    p = m.InputSpec(parameter=m.InputToParameterSpec(arg=m.TensorArgument(name="p_w"), parameter_name="l.weight"))
    u = m.InputSpec(user_input=m.UserInputSpec(arg=m.Argument(as_tensor=m.TensorArgument(name="x"))))
    c = m.InputSpec(constant_input=m.InputToConstantInputSpec(name="flag", value=m.ConstantValue(as_bool=True)))
    o = m.OutputSpec(user_output=m.UserOutputSpec(arg=m.Argument(as_int=3)))
    assert (specs.graph_name(p), specs.target_name(p)) == ("p_w", "l.weight")
    assert (specs.graph_name(u), specs.target_name(u)) == ("x", None)
    assert (specs.graph_name(c), specs.spec_member(c).role) == ("flag", "constant_input")
    assert specs.graph_name(o) is None and specs.spec_member(o).is_user


def test_a_member_without_a_role_fails_at_import(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(specs._ROLES["InputSpec"], "token")
    with pytest.raises(AssertionError, match=r"no role to InputSpec\.token; add it to _ROLES"):
        specs._table("InputSpec")
