"""validate_op on the test op library: every finding code with its full message, kernels, fake impls, vmap routes."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import oplib.validate_lib as vl
import pytest
import torch
from support.clirun import run_python

import opwire
from opwire.errors import OpValidationError
from opwire.schema import models as m
from opwire.validation.catalog import CODES, finding, node_finding
from opwire.validation.findings import Severity
from opwire.validation.validate import OpReport, validate_op

ROOT = Path(__file__).resolve().parents[2]
_SERIAL_HINT = "Tensor, Tensor?, Tensor[], int, SymInt, float, bool, str, Scalar, ScalarType, Device, lists of these"
_AOTI_TYPES = "(Tensor, Tensor[], int, SymInt, int[], float, bool, str, ScalarType, Device, Layout, MemoryFormat)"
_AOTI_ARG = (
    "torch 2.13's AOTInductor C++ proxy executor has no branch for {} arguments of an extern kernel and fails "
    "when the compiled model loads the call"
)
_AOTI_RET = (
    "opwire_vt::aoti.default: return {i} has type {t}; torch 2.13's AOTInductor C++ proxy executor only hands "
    "Tensor and Tensor-list outputs of an extern kernel back to the compiled model; a {t} output fails when the "
    "compiled model runs the call"
)
_VMAP_FIX = "register a vmap rule with torch.library.register_vmap"


@pytest.fixture(scope="module")
def reports() -> dict[str, OpReport]:
    return {r.op: r for r in validate_op("opwire_vt", sample_inputs=vl.sample_inputs)}


def _one(reports: dict[str, OpReport], op: str, code: str, index: int = 0) -> tuple[str, str, Severity]:
    found = [f for f in reports[op].findings if f.code == code]
    assert found, f"{op} has no {code}: {[f.code for f in reports[op].findings]}"
    f = found[index]
    assert f.op == op
    return f.message, f.fix, f.severity


# (op, code, index among that op's findings of the code, message, fix)
EXPECTED = [
    (
        "opwire_vt::ghost.default",
        "schema_missing",
        0,
        "opwire_vt::ghost.default: kernels are registered for CPU but no schema is defined; torch.export, the proxy "
        "executor and opwire cannot bind a call to an op without a schema",
        "define the op (torch.library.define, Library.define or m.def in TORCH_LIBRARY) before registering kernels "
        "for it, in every process that loads the kernels",
    ),
    (
        "opwire_vt::bad_types.default",
        "unserializable_argument",
        0,
        "opwire_vt::bad_types.default: argument 'd' has type Dict(int, Tensor), which no Argument member can carry; "
        "torch.export.save and opwire cannot write a call of this op (serialize_input raises SerializeError 'Dict "
        "keys must be strings' (only Dict(str, V) is carried))",
        f"change 'd' to a serializable type ({_SERIAL_HINT}), or keep the op out of exported graphs",
    ),
    (
        "opwire_vt::bad_types.default",
        "unserializable_argument",
        1,
        "opwire_vt::bad_types.default: argument 'devs' has type Device[], which no Argument member can carry; "
        "torch.export.save and opwire cannot write a call of this op (serialize_input raises SerializeError "
        "'Unsupported list/tuple argument type' for a list of this element type (Device[], ScalarType[], "
        "complex[], ...))",
        f"change 'devs' to a serializable type ({_SERIAL_HINT}), or keep the op out of exported graphs",
    ),
    (
        "opwire_vt::bad_types.default",
        "unserializable_argument",
        2,
        "opwire_vt::bad_types.default: argument 'g' has type Generator, which no Argument member can carry; "
        "torch.export.save and opwire cannot write a call of this op (serialize_input raises SerializeError "
        "'Unsupported argument type' for a torch.Generator (only `Generator?` passed None is carried, as_none))",
        f"change 'g' to a serializable type ({_SERIAL_HINT}), or keep the op out of exported graphs",
    ),
    (
        "opwire_vt::bad_types.default",
        "unserializable_argument",
        3,
        "opwire_vt::bad_types.default: argument 's' has type Storage, which no Argument member can carry; "
        "torch.export.save and opwire cannot write a call of this op (serialize_input raises SerializeError "
        "'Unsupported argument type' for a torch.UntypedStorage)",
        f"change 's' to a serializable type ({_SERIAL_HINT}), or keep the op out of exported graphs",
    ),
    (
        "opwire_vt::bad_types.default",
        "unserializable_return",
        0,
        "opwire_vt::bad_types.default: return 0 has type Dict(str, Tensor), which no Argument member can carry; "
        "torch.export.save and opwire cannot write a call of this op (serialize_outputs/serialize_output raise "
        "SerializeError 'Unable to serialize output' for it)",
        f"return serializable types ({_SERIAL_HINT}), or keep the op out of exported graphs",
    ),
    (
        "opwire_vt::none_default.default",
        "unrepresentable_default",
        0,
        "opwire_vt::none_default.default: the default of argument 'n' (int = None) cannot be written as "
        "as_int/as_sym_int: None needs as_none, which this type does not allow; a serialized call that spells out "
        "every argument cannot be written",
        "if None means 'not given', declare 'n' optional: `int? n=None`; otherwise give 'n' a default int can "
        "carry, or make it required",
    ),
    *[
        (
            "opwire_vt::aoti.default",
            "aoti_unsupported_argument",
            i,
            f"opwire_vt::aoti.default: argument '{arg}' has type {t}; " + _AOTI_ARG.format(what),
            f"if the op must run under AOTInductor, change '{arg}' to a type the C++ proxy executor handles "
            + _AOTI_TYPES,
        )
        for i, (arg, t, what) in enumerate(
            [
                ("y", "Tensor?", "optional-tensor (Tensor?)"),
                ("c", "complex", "complex"),
                ("b", "SymBool", "sym-bool"),
                ("nested", "int[][]", "nested-list"),
            ]
        )
    ],
    *[
        (
            "opwire_vt::aoti.default",
            "aoti_unsupported_return",
            i,
            _AOTI_RET.format(i=i, t=t),
            "if the op must run under AOTInductor, return Tensors (or a list of Tensors) and pass other results as "
            "tensors",
        )
        for i, t in enumerate(["SymInt", "bool", "float", "Scalar", "str"])
    ],
    (
        "opwire_vt::nofake.default",
        "no_fake_impl",
        0,
        "opwire_vt::nofake.default: no fake implementation is registered; torch.export and AOTInductor trace with "
        'FakeTensors and fail on this op ("no fake impl registered" / UnsupportedOperatorException)',
        'register one with @nofake.register_fake or torch.library.register_fake("opwire_vt::nofake")',
    ),
    (
        "opwire_vt::dead_batch.default",
        "dead_batching_rule",
        0,
        "opwire_vt::dead_batch.default: has a FuncTorchBatched kernel and a CompositeImplicitAutograd kernel; when "
        "an autograd transform runs inside vmap (vmap(grad(f)), jacrev, hessian) the op decomposes before reaching "
        "FuncTorchBatched, so the batching rule is dead there and only plain vmap uses it",
        "register the op's kernels as CompositeExplicitAutograd (plus an autograd formula) if it needs its own "
        "batching rule, or drop the FuncTorchBatched registration and let vmap use the decomposition",
    ),
    (
        "opwire_vt::pu1.default",
        "privateuse1_no_autograd",
        0,
        "opwire_vt::pu1.default: has a PrivateUse1 kernel but no AutogradPrivateUse1, Autograd or "
        "CompositeImplicitAutograd kernel; backward through it on the 'PrivateUse1' device has no formula: torch "
        '2.13\'s autograd fallback warns "an autograd kernel was not registered to the Autograd key(s)" and yields '
        "wrong gradients, older releases fail with \"Could not run ... from the 'AutogradPrivateUse1' backend\"",
        "register an autograd formula (torch.library.register_autograd, or a kernel for Autograd / "
        "AutogradPrivateUse1), or a CompositeImplicitAutograd kernel",
    ),
    (
        "opwire_vt::nofake.default",
        "vmap_fallback",
        0,
        "opwire_vt::nofake.default: has no batching rule; torch.vmap runs it once per batch element through the "
        'for-loop fallback and stacks the results (slow, and warns "There is a performance drop")',
        _VMAP_FIX,
    ),
    (
        "opwire_vt::view_op.default",
        "vmap_unsupported",
        0,
        "opwire_vt::view_op.default: has no batching rule and the vmap for-loop fallback cannot run it (the "
        "fallback path doesn't work on out= or view ops); torch.vmap raises \"Batching rule not implemented for "
        'opwire_vt::view_op"',
        _VMAP_FIX,
    ),
    (
        "opwire_vt::badfake.default",
        "opcheck_failed",
        0,
        "opwire_vt::badfake.default: torch.library.opcheck test_faketensor failed on sample 0: "
        "MetadataMismatchError: When comparing the output of opwire_vt.badfake.default on FakeTensor and concrete "
        "Tensors, found mismatched tensor metadata: Shapes torch.Size([3]) and torch.Size([4]) are not equal!",
        "make the fake implementation (register_fake) return the real kernel's output sizes and strides",
    ),
]


@pytest.mark.parametrize(("op", "code", "index", "message", "fix"), EXPECTED, ids=lambda v: str(v)[:40])
def test_finding_message(reports: dict[str, OpReport], op: str, code: str, index: int, message: str, fix: str) -> None:
    got_message, got_fix, severity = _one(reports, op, code, index)
    assert got_message == message
    assert got_fix == fix
    assert severity is CODES[code].severity


def test_every_validate_code_is_exercised() -> None:
    bc_codes = {c for c, entry in CODES.items() if entry.effects is not None}
    assert bc_codes == {
        c for c in CODES if c.startswith(("op_", "overload_", "argument_", "default_", "kwarg_", "alias_", "return_"))
    }
    # exercised in test_roundtrip_check.py (generator_argument with its own op library)
    roundtrip_codes = {c for c in CODES if c.startswith("roundtrip_")} | {"generator_argument"}
    node_codes = {c for c in CODES if c.startswith("node_")}  # exercised in tests/view/test_view_runs.py
    assert node_codes == {"node_match", "node_mismatch", "node_strides", "node_not_saved", "node_failed"}
    # replay_mismatch in tests/cli/test_replay_cmd.py, the others in test_replay_findings_cover_skips_and_drift
    replay_codes = {"replay_mismatch", "replay_skipped", "replay_schema_drift"}
    others = bc_codes | roundtrip_codes | node_codes | replay_codes
    assert {code for _, code, *_ in EXPECTED} == set(CODES) - others


def test_one_catalog_holds_every_code_and_bc_severities_follow_their_effects() -> None:
    from opwire.validation.findings import EFFECT_ORDER, EFFECT_SEVERITY
    from opwire.validation.roundtrip_check import CODES as ROUNDTRIP

    assert set(ROUNDTRIP) <= set(CODES)
    for entry in CODES.values():
        if entry.effects is not None:
            assert entry.severity is EFFECT_SEVERITY[min(entry.effects, key=EFFECT_ORDER.index)]


def test_clean_op_has_no_findings(reports: dict[str, OpReport]) -> None:
    good = reports["opwire_vt::good.default"]
    assert good.findings == ()
    assert good.fake_impl == "register_fake"
    assert good.vmap_route is not None and good.vmap_route.route == "register_vmap"
    assert good.schema is not None and good.schema.schema_str == "opwire_vt::good(Tensor x, SymInt n=2) -> Tensor"


def test_kernels_show_direct_and_computed(reports: dict[str, OpReport]) -> None:
    kernels = {k.key: k for k in reports["opwire_vt::nofake.default"].kernels}
    # a custom_op registers CompositeExplicitAutograd, not CPU, yet CPU can run; its Meta kernel exists
    assert (kernels["CPU"].registered, kernels["CPU"].runnable) == (False, True)
    assert kernels["CPU"].source == "default backend kernel"
    assert (kernels["CompositeExplicitAutograd"].registered, kernels["CompositeExplicitAutograd"].runnable) == (
        True,
        None,
    )
    assert kernels["Meta"].registered is True
    cpu_only = {k.key: k for k in reports["opwire_vt::none_default.default"].kernels}
    assert (cpu_only["CUDA"].registered, cpu_only["CUDA"].runnable) == (False, False)
    assert cpu_only["FuncTorchBatched"].source == "backend fallback"


def test_fake_impl_agrees_with_torch(reports: dict[str, OpReport]) -> None:
    from torch._library.utils import has_fake_kernel

    for name, report in reports.items():
        if report.schema is None:
            continue
        base, _, overload = name.partition("::")[2].partition(".")
        op = getattr(getattr(torch.ops.opwire_vt, base), overload)
        assert (report.fake_impl is not None) == has_fake_kernel(op), name


def test_no_fake_impl_really_fails_export() -> None:
    class M(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.ops.opwire_vt.nofake(x)

    with pytest.raises(Exception, match="fake"):
        torch.export.export(M(), (torch.randn(3),))


def test_vmap_routes_match_torch(reports: dict[str, OpReport]) -> None:
    routes = {op: r.vmap_route.route for op, r in reports.items() if r.vmap_route is not None}
    assert routes["opwire_vt::dead_batch.default"] == "batching_rule"
    assert routes["opwire_vt::comp.default"] == "decomposition"
    assert routes["opwire_vt::vmapped.default"] == "register_vmap"
    assert routes["opwire_vt::inplace_.default"] == "fallback"
    x = torch.randn(2, 3)
    for op, route in routes.items():
        fn = getattr(torch.ops.opwire_vt, op.split("::")[1].split(".")[0])
        if route == "fallback":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if op == "opwire_vt::over.two":
                    torch.vmap(lambda t: torch.ops.opwire_vt.over.two(t, 1))(x)
                elif op != "opwire_vt::pu1.default":  # pu1 has no CPU kernel
                    torch.vmap(fn)(x.clone())
        elif route == "unsupported" and op == "opwire_vt::view_op.default":
            with pytest.raises(RuntimeError, match="Batching rule not implemented for opwire_vt::view_op"):
                torch.vmap(fn)(x)
    assert torch.equal(torch.vmap(torch.ops.opwire_vt.vmapped)(x), x * 2)


def test_dead_batching_rule_is_bypassed_under_grad() -> None:
    x = torch.randn(2, 3)
    # the FuncTorchBatched kernel multiplies by 2 as the decomposition does; under vmap(grad) only the
    # decomposition runs, which we see from a gradient that exists (the Python batched kernel has no autograd)
    grads = torch.vmap(torch.func.grad(lambda t: torch.ops.opwire_vt.dead_batch(t).sum()))(x)
    assert torch.equal(grads, torch.full_like(x, 2.0))


@pytest.mark.parametrize(
    ("target", "ops"),
    [
        ("opwire_vt::over", ["opwire_vt::over.default", "opwire_vt::over.two"]),
        ("opwire_vt::over.two", ["opwire_vt::over.two"]),
        ("opwire_vt::over.default", ["opwire_vt::over.default"]),
    ],
)
def test_targets(target: str, ops: list[str]) -> None:
    assert [r.op for r in validate_op(target)] == ops


def test_unknown_target() -> None:
    with pytest.raises(OpValidationError) as info:
        opwire.validate_op("opwire_vt::nope")
    assert str(info.value) == (
        "no operator matches target 'opwire_vt::nope': expected a registered op, overload or namespace; load the "
        "library that defines it first (--import MODULE or --load-library PATH.so)"
    )


@pytest.mark.parametrize("target", ["", "a::b::c", "::x"])
def test_malformed_target(target: str) -> None:
    with pytest.raises(OpValidationError, match=r"expected a target .ns::op., .ns::op\.overload. or a namespace"):
        validate_op(target)


def test_bad_sample_inputs() -> None:
    with pytest.raises(OpValidationError) as info:
        validate_op("opwire_vt::good", sample_inputs=lambda op: [torch.randn(3)])
    assert str(info.value).startswith(
        "sample inputs for opwire_vt::good.default: expected sample 0 to be a pair (args: tuple, kwargs: dict), "
        "got Tensor"
    )


def test_report_json(reports: dict[str, OpReport]) -> None:
    data = reports["opwire_vt::inplace_.default"].to_json()
    assert data["mutated_args"] == ["x"]
    assert data["vmap_route"]["route"] == "fallback"
    assert {k["key"] for k in data["kernels"]} >= {"CPU", "FuncTorchBatched", "Python"}


def test_errors_doc_lists_every_code() -> None:
    text = (ROOT / "docs" / "errors.md").read_text()
    missing = [code for code in CODES if f"`{code}`" not in text]
    assert not missing, f"docs/errors.md does not list {missing}"
    rows = [f"| `{c.code}` | {c.severity.value} |" for c in CODES.values()]
    wrong = [row for row in rows if row not in text]
    assert not wrong, f"docs/errors.md gives another severity for {wrong}"
    assert {c.code for c in CODES.values()} >= {"node_match", "node_mismatch", "node_strides", "node_failed"}
    assert all(code == code.lower() and CODES[code].fix for code in CODES)


def test_finding_json_is_the_idl_record() -> None:
    """Validation and node comparison share the IDL's `Finding`: to_json is its JSON codec form, str() unchanged."""
    f = finding("op_added", "ns::op")
    assert f.to_json() == json.loads(opwire.dumps(f.to_model(), "json"))
    assert f.to_json() == {
        "code": "op_added",
        "severity": "info",
        "op": "ns::op",
        "message": "ns::op: new op or overload",
        "fix": "nothing to do",
        "node": None,
        "differences": None,
        "origin": None,
    }
    assert opwire.loads(json.dumps(f.to_json()), m.Finding) == f.to_model()
    assert str(f) == "info op_added: ns::op: new op or overload\n  fix: nothing to do"
    node = node_finding("node_failed", "relu", what="boom")
    assert (node.code, node.severity, node.node, node.op, node.message) == ("node_failed", "error", "relu", "", "boom")


_RENAMED = """
import sys, torch
sys.path.insert(0, {path!r})
torch.utils.rename_privateuse1_backend("opwiredev")
import oplib.validate_lib
from opwire.validation.validate import validate_op
(report,) = validate_op("opwire_vt::pu1")
print([f.message for f in report.findings if f.code == "privateuse1_no_autograd"][0])
"""


def test_privateuse1_finding_names_renamed_backend() -> None:
    # rename_privateuse1_backend works once per process: run it in a process of its own (forked, torch imported)
    code = _RENAMED.format(path=str(Path(__file__).parent))
    out = run_python(code, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    message = out.stdout.strip()
    assert "on the 'opwiredev' device" in message
    assert "from the 'Autogradopwiredev' backend" in message


def test_replay_findings_cover_skips_and_drift() -> None:
    """Skipped calls and drifted op schemas are findings too, in the catalog's words."""
    from opwire.recording.report import ReplayReport, SchemaDrift
    from opwire.validation import replay_findings

    report = ReplayReport("isolated", 3, skipped=[(2, "ns::op.default", "no Argument member carries it")])
    report.schema_drift = [SchemaDrift("ns::op.default", "ns::op(Tensor x) -> Tensor", None)]
    skipped, drift = replay_findings(report)
    assert (skipped.code, skipped.severity, skipped.op) == ("replay_skipped", "warning", "ns::op.default")
    assert skipped.message == "call 2 ns::op.default: not replayed: no Argument member carries it"
    assert (drift.code, drift.severity) == ("replay_schema_drift", "warning")
    assert drift.message == str(report.schema_drift[0]) and "not registered in this process" in drift.message
