"""The InputSpec/OutputSpec table (schema/spec_roles.py) covers the IDL and answers for real programs."""

from __future__ import annotations

import pytest

from opwire.schema import models as m
from opwire.schema import spec_roles
from opwire.schema.models import SCHEMA


def test_every_idl_member_has_an_entry() -> None:
    assert list(spec_roles.INPUT) == [f.name for f in SCHEMA.structs["InputSpec"].fields]
    assert list(spec_roles.OUTPUT) == [f.name for f in SCHEMA.structs["OutputSpec"].fields]


def test_targets_come_from_the_idl() -> None:
    assert spec_roles.INPUT["parameter"].target_field == "parameter_name"
    assert spec_roles.INPUT["buffer"].target_field == "buffer_name"
    assert spec_roles.INPUT["constant_input"].graph_field == "name"
    assert spec_roles.OUTPUT["user_input_mutation"].target_field == "user_input_name"
    assert spec_roles.INPUT["user_input"].target_field is None


def test_names_of_specs() -> None:
    p = m.InputSpec(parameter=m.InputToParameterSpec(arg=m.TensorArgument(name="p_w"), parameter_name="l.weight"))
    u = m.InputSpec(user_input=m.UserInputSpec(arg=m.Argument(as_tensor=m.TensorArgument(name="x"))))
    c = m.InputSpec(constant_input=m.InputToConstantInputSpec(name="flag", value=m.ConstantValue(as_bool=True)))
    o = m.OutputSpec(user_output=m.UserOutputSpec(arg=m.Argument(as_int=3)))
    assert (spec_roles.graph_name(p), spec_roles.target_name(p)) == ("p_w", "l.weight")
    assert (spec_roles.graph_name(u), spec_roles.target_name(u)) == ("x", None)
    assert (spec_roles.graph_name(c), spec_roles.spec_member(c).role) == ("flag", "constant_input")
    assert spec_roles.graph_name(o) is None and spec_roles.spec_member(o).is_user


def test_a_member_without_a_role_fails_at_import(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(spec_roles._ROLES["InputSpec"], "token")
    with pytest.raises(AssertionError, match=r"no role to InputSpec\.token; add it to _ROLES"):
        spec_roles._table("InputSpec")
