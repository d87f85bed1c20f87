"""bc_check on two versions of a test library: every change class, its effects per policy, torch's verdicts."""

from __future__ import annotations

import pytest
from oplib.bc_versions import V1, V2

import opwire
from opwire.errors import OpValidationError
from opwire.proxy_executor.default_policy import DefaultPolicy
from opwire.validation.bccheck import BcReport, Effect, bc_check
from opwire.validation.snapshot import snapshot_from_schemas

B, S, C = Effect.BREAKING, Effect.SILENT, Effect.COMPATIBLE


@pytest.fixture(scope="module")
def report() -> BcReport:
    return bc_check(snapshot_from_schemas(V1), snapshot_from_schemas(V2))


# op, code, message, (callers, REQUIRE_SERIALIZED, REQUIRE_CALLER, FROM_SCHEMA)
EXPECTED = [
    (
        "opwire_bc::gone.default",
        "op_removed",
        "opwire_bc::gone.default: the op was removed; files and callers that use it fail to resolve it",
        (B, B, B, B),
    ),
    (
        "opwire_bc::multi.extra",
        "overload_removed",
        "opwire_bc::multi.extra: the overload was removed (the op keeps opwire_bc::multi.default); files and callers "
        "naming it fail to resolve it",
        (B, B, B, B),
    ),
    ("opwire_bc::new_op.default", "op_added", "opwire_bc::new_op.default: new op or overload", (C, C, C, C)),
    (
        "opwire_bc::rm_arg.default",
        "argument_removed",
        "opwire_bc::rm_arg.default: argument 'm' (int) was removed; calls and files that pass it no longer bind",
        (B, B, B, B),
    ),
    (
        "opwire_bc::rename.default",
        "argument_renamed",
        "opwire_bc::rename.default: argument 'n' was renamed to 'count'; files bind arguments by name and keyword "
        "callers pass the old name",
        (B, B, B, B),
    ),
    (
        "opwire_bc::reorder.default",
        "argument_reordered",
        "opwire_bc::reorder.default: positional arguments changed order from (x, a, b) to (x, b, a); positional "
        "callers and AOTInductor's flattened int/tensor arrays pass values to the wrong arguments",
        (B, B, B, B),
    ),
    (
        "opwire_bc::retype.default",
        "argument_retyped",
        "opwire_bc::retype.default: argument 'n' changed type from int to float; old calls and files carry values "
        "of the old type",
        (B, B, B, B),
    ),
    (
        "opwire_bc::widen.default",
        "argument_widened",
        "opwire_bc::widen.default: argument 'n' changed type from int to SymInt, which accepts every Argument "
        "member int accepted; old calls and files still bind",
        (C, C, C, C),
    ),
    (
        "opwire_bc::add_req.default",
        "argument_added_no_default",
        "opwire_bc::add_req.default: new argument 'n' (int) has no default; old calls and files do not pass it",
        (B, B, B, B),
    ),
    (
        "opwire_bc::add_def.default",
        "argument_added_with_default",
        "opwire_bc::add_def.default: new argument 'n' (int = 1); old calls and FROM_SCHEMA files take the default, "
        "REQUIRE_SERIALIZED files lack it and REQUIRE_CALLER callers do not pass it",
        (C, B, B, C),
    ),
    (
        "opwire_bc::insert_def.default",
        "argument_added_with_default",
        "opwire_bc::insert_def.default: new argument 'b' (int = 0); old calls and FROM_SCHEMA files take the "
        "default, REQUIRE_SERIALIZED files lack it and REQUIRE_CALLER callers do not pass it; it is inserted before "
        "positional argument(s) a, so positional callers break",
        (B, B, B, C),
    ),
    (
        "opwire_bc::def_change.default",
        "default_changed",
        "opwire_bc::def_change.default: the default of argument 'n' changed from 1 to 2; old FROM_SCHEMA files "
        "that left it out silently run with the new default",
        (S, C, C, S),
    ),
    (
        "opwire_bc::def_remove.default",
        "default_removed",
        "opwire_bc::def_remove.default: argument 'n' lost its default 1; callers and FROM_SCHEMA files that left "
        "it out no longer bind",
        (B, C, C, B),
    ),
    (
        "opwire_bc::def_add.default",
        "default_added",
        "opwire_bc::def_add.default: argument 'n' gained the default 1",
        (C, C, C, C),
    ),
    (
        "opwire_bc::kwonly.default",
        "kwarg_only_changed",
        "opwire_bc::kwonly.default: argument 'n' became keyword-only; positional callers must now pass it by keyword",
        (B, C, C, C),
    ),
    (
        "opwire_bc::alias.default",
        "alias_changed",
        "opwire_bc::alias.default: argument 'x' changed its alias annotation from none to (a!); exported graphs "
        "were functionalized against the old mutation and aliasing contract",
        (B, B, B, B),
    ),
    (
        "opwire_bc::ret.default",
        "return_changed",
        "opwire_bc::ret.default: returns changed from (Tensor) to (Tensor, Tensor); files and callers unpack the "
        "old outputs",
        (B, B, B, B),
    ),
]


@pytest.mark.parametrize(("op", "code", "message", "effects"), EXPECTED, ids=lambda v: str(v)[:40])
def test_change(report: BcReport, op: str, code: str, message: str, effects: tuple[Effect, ...]) -> None:
    found = [c for c in report.changes if c.op == op and c.code == code and c.message == message]
    assert len(found) == 1, [c.message for c in report.changes if c.op == op]
    change = found[0]
    assert change.message == message
    got = (
        change.callers,
        change.effects["REQUIRE_SERIALIZED"],
        change.effects["REQUIRE_CALLER"],
        change.effects["FROM_SCHEMA"],
    )
    assert got == effects


def test_every_change_is_expected(report: BcReport) -> None:
    expected = sorted([(op, code) for op, code, *_ in EXPECTED] + [("opwire_bc::alias.default", "alias_changed")])
    assert sorted((c.op, c.code) for c in report.changes) == expected
    assert not any(c.op == "opwire_bc::same.default" for c in report.changes)


def test_return_alias_change(report: BcReport) -> None:
    messages = [c.message for c in report.changes if c.code == "alias_changed"]
    assert (
        "opwire_bc::alias.default: return 0 changed its alias annotation from none to (a!); exported graphs were "
        "functionalized against the old mutation and aliasing contract"
    ) in messages


@pytest.mark.parametrize("policy", list(DefaultPolicy))
def test_breaking_follows_policy(policy: DefaultPolicy) -> None:
    old = snapshot_from_schemas(["opwire_bc::f(Tensor x) -> Tensor"])
    new = snapshot_from_schemas(["opwire_bc::f(Tensor x, int n=1) -> Tensor"])
    result = bc_check(old, new, policy=policy)
    assert result.ok is (policy is DefaultPolicy.FROM_SCHEMA)
    assert result.to_json()["changes"][0]["severity"] == ("info" if result.ok else "error")


def test_policy_by_name_and_unknown() -> None:
    old = snapshot_from_schemas(["opwire_bc::f(Tensor x) -> Tensor"])
    assert bc_check(old, old, policy="require-serialized").policy is DefaultPolicy.REQUIRE_SERIALIZED
    with pytest.raises(OpValidationError, match="bc-check: unknown default policy 'sometimes'"):
        bc_check(old, old, policy="sometimes")


# Where opwire and torch's FunctionSchema.is_backward_compatible_with disagree about source callers, and why.
DISAGREEMENTS = {
    # torch calls any default change backward incompatible; the call still binds and runs, only the result can
    # differ, which opwire reports as a silent change (and as compatible for files that carry the value)
    "opwire_bc::def_change.default",
}


def test_torch_verdicts_cross_check(report: BcReport) -> None:
    callers_break = {c.op for c in report.changes if c.callers is B}
    disagree = {v.op for v in report.torch_verdicts if (not v.backward_compatible) != (v.op in callers_break)}
    assert disagree == DISAGREEMENTS
    verdicts = {v.op: v for v in report.torch_verdicts}
    # torch's check is about callers of the op: a new defaulted argument is fine for them, while opwire also
    # reports that REQUIRE_SERIALIZED files (which must carry every argument) lack it
    assert verdicts["opwire_bc::add_def.default"].backward_compatible
    # int -> SymInt: torch agrees it is compatible; opwire decides it from the Argument-member table
    assert verdicts["opwire_bc::widen.default"].backward_compatible
    # forward compatibility (old readers, new schema): torch refuses a new default, opwire only judges new
    # readers of old files and calls, so default_added is compatible here
    assert not verdicts["opwire_bc::def_add.default"].forward_compatible


def test_live_namespaces_as_new() -> None:
    import oplib.bc_v2_live  # noqa: F401  (registers version 2 of opwire_bc in this process)

    live = bc_check(snapshot_from_schemas(V1))  # new defaults to the live namespaces of the old snapshot
    files = bc_check(snapshot_from_schemas(V1), snapshot_from_schemas(V2))
    assert [(c.op, c.code) for c in live.changes] == [(c.op, c.code) for c in files.changes]
    assert opwire.bc_check is bc_check


def test_bad_inputs(tmp_path: object) -> None:
    with pytest.raises(OpValidationError, match="expected the old library as an OpLibrarySnapshot"):
        bc_check(42)  # type: ignore[arg-type]
    snap = snapshot_from_schemas(["opwire_bc::f(Tensor x) -> Tensor"])
    forged = snap.model_copy(update={"ops": [snap.ops[0].model_copy(update={"overload": "other"})]})
    with pytest.raises(OpValidationError, match="contradicts its own schema string"):
        bc_check(forged, snap)


def test_an_int_default_that_became_a_float_is_worded_with_types() -> None:
    old = snapshot_from_schemas(["opwire_bc2::scale(Tensor x, Scalar b=0) -> Tensor"])
    new = snapshot_from_schemas(["opwire_bc2::scale(Tensor x, Scalar b=0.) -> Tensor"])
    (change,) = [c for c in bc_check(old, new).changes if c.code == "default_changed"]
    assert "the default of argument 'b' changed from int 0 to float 0.0;" in change.message
