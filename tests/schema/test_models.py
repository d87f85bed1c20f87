"""Generated models: drift check, union rules, enums, recursion, docstrings."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from opwire.schema import codegen
from opwire.schema import models as m


def test_models_match_idl() -> None:
    assert codegen.main(["--check"]) == 0


def test_drift_is_reported_with_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stale = tmp_path / "models.py"
    stale.write_text(codegen.MODELS_PATH.read_text().replace("as_int: I64", "as_int: I32", 1))
    monkeypatch.setattr(codegen, "MODELS_PATH", stale)
    assert codegen.main(["--check"]) == 1
    err = capsys.readouterr().err
    assert "is out of date with the IDL" in err
    assert "python -m opwire.schema.codegen" in err


def test_header_carries_checksum() -> None:
    from opwire.schema.idl import idl_checksum

    head = codegen.MODELS_PATH.read_text().splitlines()[:2]
    assert "@generated" in head[0]
    assert head[1] == f"# idl-checksum: {idl_checksum()}"


@pytest.mark.parametrize(
    "kwargs, got",
    [({}, "got 0 (none)"), ({"as_int": 1, "as_float": 2.0}, "got 2 (as_int, as_float)")],
)
def test_union_needs_exactly_one_member(kwargs: dict[str, object], got: str) -> None:
    with pytest.raises(ValidationError) as info:
        m.Argument(**kwargs)
    msg = str(info.value)
    assert f"union Argument needs exactly one member set, {got}" in msg
    assert "members: as_none, as_tensor, as_tensors, as_int" in msg


def test_union_assignment_keeps_one_member() -> None:
    arg = m.Argument(as_int=1)
    with pytest.raises(ValidationError, match="got 2 \\(as_int, as_bool\\)"):
        arg.as_bool = True


def test_enums_are_intenums_with_torch_numbering() -> None:
    assert m.ScalarType.FLOAT == 7 and isinstance(m.ScalarType.FLOAT, int)
    assert m.Layout.Strided == 7
    assert m.MemoryFormat.ChannelsLast == 2


def test_recursive_types() -> None:
    inner = m.Graph(inputs=[], outputs=[], nodes=[], tensor_values={}, sym_int_values={}, sym_bool_values={})
    arg = m.Argument(as_graph=m.GraphArgument(name="true_graph_0", graph=inner))
    nested = m.Argument(as_string_to_argument={"a": arg, "b": m.Argument(as_none=True)})
    assert nested.value["a"].value.graph.is_single_tensor_return is False
    assert m.Value(as_list=[m.Value(as_int=1), m.Value(as_list=[])]).value[1].value == []


def test_docstrings_come_from_idl() -> None:
    assert m.Argument.__doc__ == "One argument or output of a node: exactly one member is set."
    assert m.TensorValue.model_fields["data"].description is not None
    assert "row-major" in str(m.TensorValue.model_fields["data"].description)


def test_integers_are_range_checked() -> None:
    with pytest.raises(ValidationError):
        m.Argument(as_int=2**63)
    with pytest.raises(ValidationError):
        m.Argument(as_int=True)


def test_an_assembled_model_is_the_validated_one() -> None:
    """`assembled` (the recorder's unvalidated build) gives what validation gives: equal, same fields set, same
    bytes in every format; a required field left out or an unknown one is refused."""
    from opwire import dumps
    from opwire.schema.base import assembled

    ta = [m.TensorArgument(name="t1"), m.TensorArgument(name="t2.1")]
    for member, value in (("as_tensor", ta[0]), ("as_tensors", ta)):
        built, checked = assembled(m.Argument, {member: value}), m.Argument(**{member: value})
        named = assembled(m.NamedArgument, {"name": "x", "arg": built, "kind": m.ArgumentKind.KEYWORD})
        want = m.NamedArgument(name="x", arg=checked, kind=m.ArgumentKind.KEYWORD)
        assert named == want and named.model_fields_set == want.model_fields_set
        assert list(built.__dict__) == list(checked.__dict__)
        record = m.CallRecord(target="aten::add.Tensor", inputs=[named], outputs=[built], metadata={})
        expected = m.CallRecord(target="aten::add.Tensor", inputs=[want], outputs=[checked], metadata={})
        for fmt in ("json", "binary", "compact"):
            assert dumps(record, format=fmt) == dumps(expected, format=fmt)
    assert assembled(m.TensorArgument, {"name": "t3"}) == m.TensorArgument(name="t3")
    with pytest.raises(TypeError):
        assembled(m.NamedArgument, {"name": "x"})
    with pytest.raises(TypeError):
        assembled(m.TensorArgument, {"name": "t1", "nope": 1})
