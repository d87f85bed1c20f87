"""The operator-schema model and the schema type -> Argument member table (opwire.schema.ops)."""

from __future__ import annotations

import collections
import json

import pytest
import torch

from opwire.errors import OpValidationError
from opwire.schema import models as m
from opwire.schema import ops
from opwire.schema._optype import parse_schema_text

ALL_SCHEMAS = torch._C._jit_get_all_schemas()


def test_every_registered_schema_is_read_and_every_type_is_classified() -> None:
    stats: collections.Counter[str] = collections.Counter()
    reasons: collections.Counter[str] = collections.Counter()
    aten_args = 0
    for fs in ALL_SCHEMAS:
        s = ops.op_schema(fs)
        assert [a.name for a in s.arguments] == [a.name for a in fs.arguments]
        assert s.qualname == (f"{fs.name}.{fs.overload_name}" if fs.overload_name else fs.name)
        for a, ta in zip(s.arguments, fs.arguments, strict=True):
            assert ops.parse_type(a.type) == a.parsed, a.type
            assert a.has_default == ta.has_default_value() and (a.default_str is not None) == a.has_default
            assert a.kwarg_only == ta.kwarg_only and a.N == ta.N
            why = ops.why_not_carriable(a.parsed)
            assert (why is None) == bool(ops.input_members(a.parsed))
            stats["argument carriable" if why is None else "argument not carriable"] += 1
            if why is not None:
                assert "not a schema type opwire knows" not in why, (str(fs), why)
                reasons[why.partition(": ")[2][:50]] += 1
            aten_args += fs.name.startswith("aten::")
        for r in s.returns:
            why = ops.why_not_carriable(r.parsed, "return")
            stats["return carriable" if why is None else "return not carriable"] += 1
            if why is not None:
                assert "not a schema type opwire knows" not in why, (str(fs), why)
    print(f"\n{len(ALL_SCHEMAS)} schemas, {aten_args} aten arguments: {dict(stats)}")
    for reason, n in reasons.most_common():
        print(f"  {n:4d} x {reason}")
    assert stats["argument carriable"] > 14000 and stats["return carriable"] > 4500


ATEN_NOT_CARRIABLE_INPUTS = {
    *(f"({k}, tVal)[]" for k in ("Tensor", "bool", "complex", "float", "int", "str")),
    *(f"Dict({k}, t)" for k in ("Tensor", "bool", "complex", "float", "int", "str")),
    "AnyEnumType", "Any[]", "Future(t)", "Generator", "RRef(t)", "Storage", "Stream", "complex[]",
    "__torch__.torch.classes.rnn.CellParamsBase[]", "t", "t1", "t2", "t[]",
}  # fmt: skip


def test_aten_types_no_member_carries_are_exactly_the_known_ones() -> None:
    """aten's uncarriable argument types are TorchScript-only, RNG/storage/stream objects, or odd lists."""
    found = set()
    for fs in ALL_SCHEMAS:
        if fs.name.startswith("aten::"):
            found |= {a.type for a in ops.op_schema(fs).arguments if ops.why_not_carriable(a.parsed) is not None}
    assert found == ATEN_NOT_CARRIABLE_INPUTS


WRAPPED = {"as_int", "as_float", "as_bool", "as_complex", "as_sym_int", "as_sym_float", "as_sym_bool"}  # x * 2
EXPECTED_INPUTS = {
    "Tensor": {"as_tensor"} | WRAPPED,
    "Tensor?": {"as_tensor", "as_optional_tensor", "as_none"} | WRAPPED,
    "Tensor[]": {"as_tensors"},
    "Tensor?[]": {"as_optional_tensors", "as_tensors"},
    "Tensor[][]": {"as_nested_tensors"},
    "int": {"as_int", "as_sym_int"},
    "SymInt": {"as_int", "as_sym_int"},
    "int[]": {"as_ints", "as_sym_ints"},
    "SymInt[]": {"as_ints", "as_sym_ints"},
    "int[2]": {"as_ints", "as_sym_ints"},
    "int[]?": {"as_ints", "as_sym_ints", "as_none"},
    "float": {"as_float", "as_sym_float"},
    "float[]": {"as_floats", "as_sym_floats"},
    "bool": {"as_bool", "as_sym_bool"},
    "bool[]": {"as_bools", "as_sym_bools"},
    "str": {"as_string"},
    "str?": {"as_string", "as_none"},
    "str[]": {"as_strings"},
    "Scalar": {"as_int", "as_float", "as_bool", "as_complex", "as_sym_int", "as_sym_float", "as_sym_bool"},
    "Scalar[]": {"as_ints", "as_floats", "as_bools", "as_sym_ints", "as_sym_floats", "as_sym_bools"},
    "ScalarType": {"as_scalar_type"},
    "ScalarType?": {"as_scalar_type", "as_none"},
    "Layout": {"as_layout"},
    "MemoryFormat": {"as_memory_format"},
    "Device": {"as_device"},
    "Device?": {"as_device", "as_none"},
    "complex": {"as_complex"},
    "Generator?": {"as_none"},
    "GraphModule": {"as_graph"},
    "__torch__.torch.classes.quantized.LinearPackedParamsBase": {"as_custom_obj"},
    "Dict(str, Tensor)": {"as_string_to_argument"},
    "Any": {"as_string", "as_int", "as_float", "as_bool", "as_tensor", "as_none"},
}
NOT_CARRIABLE_INPUTS = [
    "Generator",
    "Storage",
    "Stream",
    "Device[]",
    "ScalarType[]",
    "complex[]",
    "Dict(int, Tensor)",
    "Dict(str, t)",
    "Future(t)",
    "t",
    "(int, t)[]",
]
EXPECTED_RETURNS = {
    "Tensor": {"as_tensor", "as_none"},
    "Tensor?": {"as_tensor", "as_none", "as_optional_tensor"},
    "Tensor[]": {"as_tensors"},
    "int": {"as_sym_int", "as_int"},
    "SymInt": {"as_sym_int", "as_int"},
    "float": {"as_sym_float", "as_float"},
    "bool": {"as_sym_bool", "as_bool"},
    "SymBool": {"as_sym_bool", "as_bool"},
    "str": {"as_string"},
    "int[]": {"as_ints", "as_sym_ints"},
    "Scalar": {"as_sym_int", "as_int", "as_sym_float", "as_float", "as_sym_bool", "as_bool", "as_complex"},
}


@pytest.mark.parametrize("spelled", sorted(EXPECTED_INPUTS))
def test_input_members(spelled: str) -> None:
    assert ops.input_members(spelled) == EXPECTED_INPUTS[spelled]
    assert ops.why_not_carriable(spelled) is None


@pytest.mark.parametrize("spelled", NOT_CARRIABLE_INPUTS)
def test_types_no_member_carries_are_named_with_a_reason(spelled: str) -> None:
    assert ops.input_members(spelled) == frozenset()
    why = ops.why_not_carriable(spelled)
    assert why is not None and why.startswith(f"{spelled}: ") and "opwire knows" not in why


@pytest.mark.parametrize("spelled", sorted(EXPECTED_RETURNS))
def test_return_members(spelled: str) -> None:
    assert ops.return_members(spelled) == EXPECTED_RETURNS[spelled]


def test_table_names_only_argument_members() -> None:
    every = set(ops.ARGUMENT_MEMBERS)
    assert every == set(m.Argument.model_fields)
    for spelled in list(EXPECTED_INPUTS) + list(EXPECTED_RETURNS):
        assert ops.input_members(spelled) <= every and ops.return_members(spelled) <= every
    with pytest.raises(AssertionError, match="as_tensr"):
        ops._m("as_tensr")


def test_return_reason_names_the_output_step() -> None:
    assert ops.why_not_carriable("Tensor[][]", "return") == (
        "Tensor[][]: serialize_outputs/serialize_output raise SerializeError 'Unable to serialize output' for it"
    )
    assert ops.why_not_carriable("Generator", "return") is not None


class _Everything(torch.nn.Module):
    def forward(self, x: torch.Tensor, idx: torch.Tensor) -> tuple[torch.Tensor, ...]:
        a = torch.ops.aten.add.Tensor(x, x, alpha=2)
        b = torch.ops.aten.cosine_similarity.default(x, x, 1, 0)
        c = torch.ops.aten.add.Scalar(x, 1j).real
        d = torch.ops.aten.zeros.default([2, 3], dtype=torch.float64, layout=torch.strided, device="cpu")
        e = torch.ops.aten.clone.default(x, memory_format=torch.contiguous_format)
        f = torch.ops.aten.index.Tensor(x, [None, idx])
        g = torch.ops.aten.cat.default([x, x], 1)
        h0, h1 = torch.ops.aten.split.Tensor(x, 2, 1)
        i0, i1 = torch.ops.aten.var_mean.correction(x, [1], correction=0, keepdim=True)
        j = torch.ops.aten.div.Tensor_mode(x, a, rounding_mode="floor")
        k = torch.ops.aten.sum.dim_IntList(x, [], dtype=torch.float32)
        n = torch.ops.aten.upsample_nearest2d.vec(x[None, None], None, [2.0, 2.0])
        return a, b, c, d, e, f, g, h0, h1, i0, i1, j, k, n, torch.ops.aten.sym_size.int(x, 0) * x


def test_torch_serializer_output_fits_the_table() -> None:
    """What torch's own serializer writes for real ops is always a member the table allows."""
    from torch._export.serde.serialize import serialize

    x, idx = torch.randn(2, 3), torch.tensor([0, 2])
    dim = torch.export.Dim("n", min=2, max=8)
    ep = torch.export.export(_Everything(), (x, idx), dynamic_shapes=({0: dim}, None))
    program = json.loads(serialize(ep).exported_program)
    seen: set[tuple[str, str]] = set()
    for node in program["graph_module"]["graph"]["nodes"]:
        target = node["target"]
        if not target.startswith("torch.ops."):
            continue
        ns, op, overload = target.removeprefix("torch.ops.").split(".")
        schema = ops.op_schema(getattr(getattr(getattr(torch.ops, ns), op), overload))
        for named in node["inputs"]:
            arg = schema.argument(named["name"])
            assert arg is not None, (target, named["name"])
            (member,) = named["arg"]
            assert member in ops.input_members(arg.parsed), (target, arg.name, arg.type, member)
            seen.add((arg.type, member))
        for ret, out in zip(schema.returns, node["outputs"], strict=True):
            (member,) = out
            assert member in ops.return_members(ret.parsed), (target, ret.type, member)
    assert seen >= {
        ("Device?", "as_device"),
        ("Layout?", "as_layout"),
        ("MemoryFormat?", "as_memory_format"),
        ("Scalar", "as_complex"),
        ("Scalar", "as_int"),
        ("ScalarType?", "as_scalar_type"),
        ("SymInt[]", "as_ints"),
        ("SymInt[]?", "as_none"),
        ("Tensor", "as_sym_int"),
        ("Tensor?[]", "as_optional_tensors"),
        ("Tensor[]", "as_tensors"),
        ("float", "as_float"),
        ("float[]?", "as_floats"),
        ("int[1]?", "as_ints"),
        ("str?", "as_string"),
    }


CUSTOM = (
    'opwire_ops_test::every(Tensor x, int n=2, float alpha=1.5, bool flag=True, str mode="sum", '
    "int[] dims=[0, 1], int[2] pair=[3, 4], Device? device=None, ScalarType? dtype=None, Tensor? bias=None, "
    "Scalar s=0.5, SymInt[] sizes=[], Layout? layout=None, MemoryFormat? fmt=None, *, int k=3, "
    "Tensor(a!) out) -> (Tensor(a!), Tensor[], int)"
)


def test_custom_op_schema_string_with_defaults_of_every_type() -> None:
    s = ops.parse_op_schema(CUSTOM)
    assert (s.name, s.overload, s.namespace, s.is_mutable) == ("opwire_ops_test::every", "", "opwire_ops_test", True)
    got = {a.name: (a.type, a.default, a.default_str, a.kwarg_only) for a in s.arguments}
    assert got["n"] == ("int", 2, "2", False)
    assert got["alpha"] == ("float", 1.5, "1.5", False)
    assert got["flag"] == ("bool", True, "True", False)
    assert got["mode"] == ("str", "sum", '"sum"', False)
    assert got["dims"] == ("int[]", [0, 1], "[0, 1]", False)
    assert got["pair"][:2] == ("int[2]", [3, 4]) and s.argument("pair").N == 2  # type: ignore[union-attr]
    assert got["device"] == ("Device?", None, "None", False)
    assert got["dtype"] == ("ScalarType?", None, "None", False)
    assert got["bias"] == ("Tensor?", None, "None", False)
    assert got["s"][:2] == ("Scalar", 0.5)
    assert got["sizes"] == ("SymInt[]", [], "[]", False)
    assert got["k"] == ("int", 3, "3", True)
    out = s.argument("out")
    assert out is not None and (out.type, out.alias, out.is_write, out.has_default) == ("Tensor", "a!", True, False)
    assert [(r.type, r.alias) for r in s.returns] == [("Tensor", "a!"), ("Tensor[]", None), ("int", None)]
    assert s.argument("nope") is None and s.argument("x").is_optional is False  # type: ignore[union-attr]


def test_live_library_ops_match_their_strings() -> None:
    lib = torch.library.Library("opwire_ops_test", "FRAGMENT")
    lib.define(CUSTOM.partition("::")[2])

    @torch.library.custom_op("opwire_ops_test::co", mutates_args=())
    def co(
        x: torch.Tensor, n: int = 2, scale: float = 0.5, name: str = "a", dtype: torch.dtype | None = None
    ) -> torch.Tensor:
        return x.clone()

    live = ops.op_schema(torch.ops.opwire_ops_test.every.default)
    assert live == ops.parse_op_schema(CUSTOM)
    co_schema = ops.op_schema(torch.ops.opwire_ops_test.co.default)
    assert [(a.name, a.type, a.default) for a in co_schema.arguments] == [
        ("x", "Tensor", None),
        ("n", "SymInt", 2),
        ("scale", "float", 0.5),
        ("name", "str", "a"),
        ("dtype", "ScalarType?", None),
    ]
    assert ops.op_schema(torch.ops.aten.add.Tensor._schema) == ops.op_schema(torch.ops.aten.add.Tensor)


def test_snapshot_round_trip_and_contradiction() -> None:
    s = ops.op_schema(torch.ops.aten.add_.Tensor)
    snap = s.to_snapshot(("pt2_compliant_tag", "core"))
    assert snap.tags == ["core", "pt2_compliant_tag"] and snap.overload == "Tensor"
    assert [a.model_dump() for a in snap.arguments] == [
        {"name": "self", "type": "Tensor", "default_value": None, "kwarg_only": False, "alias_info": "a!"},
        {"name": "other", "type": "Tensor", "default_value": None, "kwarg_only": False, "alias_info": None},
        {"name": "alpha", "type": "Scalar", "default_value": "1", "kwarg_only": True, "alias_info": None},
    ]
    assert ops.OpSchema.from_snapshot(snap) == s
    tampered = snap.model_copy(update={"arguments": snap.arguments[:2]})
    with pytest.raises(OpValidationError, match=r"snapshot of aten::add_.Tensor contradicts its own schema string"):
        ops.OpSchema.from_snapshot(tampered)


@pytest.mark.parametrize("text", ["aten::add(Tensor self", "not a schema", "x::y(Tensor a) -> Foo", ""])
def test_bad_schema_strings_are_opwire_errors(text: str) -> None:
    with pytest.raises(OpValidationError, match=r"^not a valid operator schema .*: torch says .*; write it as"):
        ops.parse_op_schema(text)


def test_bad_op_objects_are_opwire_errors() -> None:
    with pytest.raises(OpValidationError) as info:
        ops.op_schema(42)
    assert str(info.value) == (
        "expected an operator overload (torch.ops.ns.op.overload), a FunctionSchema or a schema string, got int; "
        "pick an overload such as torch.ops.aten.add.Tensor"
    )


def test_type_grammar() -> None:
    assert str(ops.parse_type("Tensor(a!)[]")) == "Tensor[]"
    assert str(ops.parse_type("int[](a)")) == "int[]"
    assert str(ops.parse_type("Dict(str, t)(a!)")) == "Dict(str, t)"
    assert str(ops.parse_type("(str, tVal)[]")) == "(str, tVal)[]"
    assert ops.parse_type("SymInt[2]?") == ops.SchemaType(
        "optional", args=(ops.SchemaType("list", args=(ops.SchemaType("base", "SymInt"),), size=2),)
    )
    with pytest.raises(ValueError, match="expected end of type"):
        ops.parse_type("Tensor Tensor")
    p = parse_schema_text("prim::PythonOp(...) -> ...")
    assert p.is_vararg and p.is_varret and p.arguments == ()
    p = parse_schema_text("aten::dict.str((str, tVal)[] inputs) -> Dict(str, tVal)")
    assert str(p.arguments[0].type) == "(str, tVal)[]" and str(p.returns[0].type) == "Dict(str, tVal)"
