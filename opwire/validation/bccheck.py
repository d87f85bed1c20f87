"""`opwire.bc_check`: does a new version of an op library break callers and files written against the old?

Every change gets a stable code and its effect on source callers and on serialized files under each
default policy (docs/policies.md). Types are compared through the `schema/ops.py` table: a retype that
keeps every `Argument` member the old type accepted is a widening, not a break. torch's own
`FunctionSchema.is_backward_compatible_with` / `check_forward_compatible_with` verdicts ride along.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from opwire.errors import BindError, OpValidationError, first_line
from opwire.proxy_executor.default_policy import DefaultPolicy
from opwire.schema import models as m
from opwire.schema import ops
from opwire.serde.json import to_jsonable
from opwire.validation.catalog import CODES
from opwire.validation.findings import EFFECT_ORDER, EFFECT_SEVERITY, Effect, Severity
from opwire.validation.snapshot import load_snapshot, snapshot_ops

__all__ = ["BcChange", "BcReport", "Effect", "TorchVerdict", "bc_check"]


_B, _S, _C = Effect.BREAKING, Effect.SILENT, Effect.COMPATIBLE
_RS, _RC, _FS = "REQUIRE_SERIALIZED", "REQUIRE_CALLER", "FROM_SCHEMA"


@dataclass(frozen=True)
class BcChange:
    """One classified change between two versions of an op."""

    code: str
    op: str
    message: str
    fix: str
    callers: Effect
    effects: dict[str, Effect] = field(hash=False)  # DefaultPolicy name -> effect on files under it

    def effect(self, policy: DefaultPolicy) -> Effect:
        """The worst of the change's effect on source callers and on files under `policy`."""
        return min(self.effects[policy.name], self.callers, key=EFFECT_ORDER.index)

    def severity(self, policy: DefaultPolicy) -> Severity:
        """error when breaking under `policy`, warning when it silently changes results, else info."""
        return EFFECT_SEVERITY[self.effect(policy)]

    def describe(self, policy: DefaultPolicy) -> str:
        """The change as `opwire ops bc-check` prints it under `policy`: severity, code, message; effects; fix."""
        effects = ", ".join(f"{k}: {v.value}" for k, v in self.effects.items())
        return (
            f"{self.severity(policy).value} {self.code}: {self.message}\n"
            f"    callers: {self.callers.value}; files under {effects}\n"
            f"    fix: {self.fix}"
        )

    def to_model(self, policy: DefaultPolicy) -> m.BcCheckChange:
        """The change as the IDL's `BcCheckChange` record (severity under `policy`)."""
        return m.BcCheckChange(
            code=self.code,
            severity=self.severity(policy).value,
            op=self.op,
            message=self.message,
            fix=self.fix,
            callers=self.callers.value,
            effects={k: v.value for k, v in self.effects.items()},
        )

    def to_json(self, policy: DefaultPolicy) -> dict[str, Any]:
        """The change as JSON-ready data (the JSON codec's form of `to_model(policy)`)."""
        data: dict[str, Any] = to_jsonable(self.to_model(policy))
        return data


@dataclass(frozen=True)
class TorchVerdict:
    """torch's own verdict on one overload present in both versions."""

    op: str
    backward_compatible: bool
    forward_compatible: bool
    reason: str


@dataclass(frozen=True)
class BcReport:
    """Every change between two op-library versions, judged under one default policy."""

    policy: DefaultPolicy
    changes: tuple[BcChange, ...]
    torch_verdicts: tuple[TorchVerdict, ...]

    @property
    def breaking(self) -> tuple[BcChange, ...]:
        """The changes that break callers or files under the report's policy."""
        return tuple(c for c in self.changes if c.effect(self.policy) is _B)

    @property
    def ok(self) -> bool:
        """True when nothing breaks under the report's policy."""
        return not self.breaking

    def __str__(self) -> str:
        """The report as `opwire ops bc-check` prints it: every change, then one line counting the breaking ones."""
        lines = [c.describe(self.policy) for c in self.changes]
        lines.append(f"{len(self.changes)} change(s), {len(self.breaking)} breaking under {self.policy.name}")
        return "\n".join(lines)

    def to_model(self) -> m.BcCheckReport:
        """The report as the IDL's `BcCheckReport` record (what `opwire ops bc-check --json` prints)."""
        return m.BcCheckReport(
            policy=self.policy.name,
            breaking=len(self.breaking),
            changes=[c.to_model(self.policy) for c in self.changes],
            torch=[m.BcTorchVerdict(**vars(v)) for v in self.torch_verdicts],
        )

    def to_json(self) -> dict[str, Any]:
        """The report as JSON-ready data (the JSON codec's form of `to_model()`)."""
        data: dict[str, Any] = to_jsonable(self.to_model())
        return data


def _change(code: str, op: str, **fields: Any) -> BcChange:
    entry = CODES[code]
    values = {"op": op, **fields}
    assert entry.effects is not None, f"{code} is no bc-check code"
    callers, rs, rc, fs = entry.effects  # callers: the worst case, lowered below where this change is benign
    if code == "argument_added_with_default" and not fields.get("where"):
        callers = _C  # appended after the existing positional arguments: old calls still bind
    if code == "kwarg_only_changed" and fields.get("new") != "keyword-only":
        callers = _C  # keyword-only became positional: old keyword calls still bind
    effects = {_RS: rs, _RC: rc, _FS: fs}
    return BcChange(code, op, entry.message.format(**values), entry.fix.format(**values), callers, effects)


def _key(o: m.OpSchemaSnapshot) -> str:
    return f"{o.name}.{o.overload or 'default'}"


def _positional(args: list[m.OpArgumentSnapshot]) -> list[str]:
    return [a.name for a in args if not a.kwarg_only]


def _alias(a: m.OpArgumentSnapshot) -> str:
    return "none" if a.alias_info is None else f"({a.alias_info})"


def _retype(op: str, old: m.OpArgumentSnapshot, new: m.OpArgumentSnapshot) -> BcChange:
    before, after = ops.input_members(old.type), ops.input_members(new.type)
    code = "argument_widened" if before and before <= after else "argument_retyped"
    return _change(code, op, arg=old.name, old=old.type, new=new.type)


def _pair_renames(
    op: str, old: list[m.OpArgumentSnapshot], new: list[m.OpArgumentSnapshot]
) -> tuple[list[BcChange], dict[str, str]]:
    """Renames: a removed and an added argument at the same position with the same type."""
    old_names, new_names = {a.name for a in old}, {a.name for a in new}
    out: list[BcChange] = []
    renamed: dict[str, str] = {}
    for i, a in enumerate(old):
        if a.name in new_names or i >= len(new):
            continue
        b = new[i]
        if b.name not in old_names and b.type == a.type and b.kwarg_only == a.kwarg_only:
            renamed[a.name] = b.name
            out.append(_change("argument_renamed", op, arg=a.name, new=b.name))
    return out, renamed


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _defaults_worded(a: m.OpArgumentSnapshot, b: m.OpArgumentSnapshot) -> tuple[str, str]:
    """The old and new defaults as the message shows them: with their types when the spelling alone would read
    as no change (`int 0` to `float 0.0`, where the schema spells `0` and `0.`)."""
    old, new = str(a.default_value), str(b.default_value)
    x, y = _number(old), _number(new)
    if x is not None and y is not None and x == y:
        kind_old = "float" if any(c in old for c in ".eE") else "int"
        kind_new = "float" if any(c in new for c in ".eE") else "int"
        shown = {"int": lambda v: str(int(v)), "float": lambda v: repr(float(v))}
        return f"{kind_old} {shown[kind_old](x)}", f"{kind_new} {shown[kind_new](y)}"
    return old, new


def _compare_arg(op: str, a: m.OpArgumentSnapshot, b: m.OpArgumentSnapshot) -> list[BcChange]:
    out: list[BcChange] = []
    if a.type != b.type:
        out.append(_retype(op, a, b))
    if a.alias_info != b.alias_info:
        out.append(_change("alias_changed", op, what=f"argument '{a.name}'", old=_alias(a), new=_alias(b)))
    if a.default_value != b.default_value:
        if a.default_value is None:
            out.append(_change("default_added", op, arg=a.name, new=b.default_value))
        elif b.default_value is None:
            out.append(_change("default_removed", op, arg=a.name, old=a.default_value))
        else:
            old, new = _defaults_worded(a, b)
            out.append(_change("default_changed", op, arg=a.name, old=old, new=new))
    if a.kwarg_only != b.kwarg_only:
        kinds = ("positional", "keyword-only")
        consequence = (
            "positional callers must now pass it by keyword"
            if b.kwarg_only
            else "keyword callers keep working; files bind it by name"
        )
        out.append(
            _change(
                "kwarg_only_changed",
                op,
                arg=a.name,
                old=kinds[a.kwarg_only],
                new=kinds[b.kwarg_only],
                consequence=consequence,
            )
        )
    return out


def _added(op: str, b: m.OpArgumentSnapshot, after: list[str]) -> BcChange:
    if b.default_value is None:
        return _change("argument_added_no_default", op, arg=b.name, type=b.type)
    where = ""
    if not b.kwarg_only and after:
        where = f"; it is inserted before positional argument(s) {', '.join(after)}, so positional callers break"
    return _change("argument_added_with_default", op, arg=b.name, type=b.type, default=b.default_value, where=where)


def _compare_args(op: str, old: m.OpSchemaSnapshot, new: m.OpSchemaSnapshot) -> list[BcChange]:
    out, renamed = _pair_renames(op, old.arguments, new.arguments)
    new_by_name = {b.name: b for b in new.arguments}
    for a in old.arguments:
        b = new_by_name.get(renamed.get(a.name, a.name))
        if b is None:
            out.append(_change("argument_removed", op, arg=a.name, type=a.type))
        else:
            out.extend(_compare_arg(op, a, b))
    old_pos = [renamed.get(n, n) for n in _positional(old.arguments)]
    new_pos = _positional(new.arguments)
    common_old = [n for n in old_pos if n in new_pos]
    common_new = [n for n in new_pos if n in common_old]
    if common_old != common_new:
        out.append(_change("argument_reordered", op, old=", ".join(common_old), new=", ".join(common_new)))
    known = set(renamed.values()) | {a.name for a in old.arguments}
    for b in new.arguments:
        if b.name not in known:
            after = [n for n in new_pos[new_pos.index(b.name) + 1 :] if n in common_new] if b.name in new_pos else []
            out.append(_added(op, b, after))
    return out


def _compare_returns(op: str, old: m.OpSchemaSnapshot, new: m.OpSchemaSnapshot) -> list[BcChange]:
    before = [r.type for r in old.returns]
    after = [r.type for r in new.returns]
    if before != after:
        return [_change("return_changed", op, old=", ".join(before), new=", ".join(after))]
    out = []
    for i, (a, b) in enumerate(zip(old.returns, new.returns)):
        if a.alias_info != b.alias_info:
            out.append(_change("alias_changed", op, what=f"return {i}", old=_alias(a), new=_alias(b)))
    return out


def _torch_verdict(op: str, old: m.OpSchemaSnapshot, new: m.OpSchemaSnapshot) -> TorchVerdict:
    before: Any
    after: Any
    try:
        before, after = torch._C.parse_schema(old.schema_str), torch._C.parse_schema(new.schema_str)
    except (RuntimeError, ValueError) as exc:  # parse_schema raises both
        return TorchVerdict(op, False, False, f"torch cannot parse the schema: {first_line(exc)}")
    forward, reason = after.check_forward_compatible_with(before)
    return TorchVerdict(op, bool(after.is_backward_compatible_with(before)), bool(forward), str(reason))


def _as_snapshot(x: Any, what: str) -> m.OpLibrarySnapshot:
    if isinstance(x, m.OpLibrarySnapshot):
        snap = x
    elif isinstance(x, (str, Path)):
        snap = load_snapshot(x)
    elif isinstance(x, Iterable):
        snap = snapshot_ops(list(x))
    else:
        raise OpValidationError(
            f"bc_check: expected the {what} library as an OpLibrarySnapshot, a snapshot file path or a list of "
            f"live namespaces, got {type(x).__name__}"
        )
    for o in snap.ops:  # a snapshot must agree with its own schema strings
        ops.OpSchema.from_snapshot(o)
    return snap


def _policy(policy: DefaultPolicy | str) -> DefaultPolicy:
    try:
        return DefaultPolicy.parse(policy)
    except BindError as exc:
        raise OpValidationError(f"bc-check: {exc}") from None


def bc_check(
    old: m.OpLibrarySnapshot | str | Path | Iterable[str],
    new: m.OpLibrarySnapshot | str | Path | Iterable[str] | None = None,
    policy: DefaultPolicy | str = DefaultPolicy.FROM_SCHEMA,
) -> BcReport:
    """Classify every change from `old` to `new` (default: the live namespaces `old` covers)."""
    chosen = _policy(policy)
    before = _as_snapshot(old, "old")
    after = _as_snapshot(new if new is not None else before.namespaces, "new")
    old_ops = {_key(o): o for o in before.ops}
    new_ops = {_key(o): o for o in after.ops}
    new_names = {o.name for o in after.ops}
    changes: list[BcChange] = []
    verdicts: list[TorchVerdict] = []
    for key in sorted(old_ops.keys() | new_ops.keys()):
        a, b = old_ops.get(key), new_ops.get(key)
        if a is None:
            changes.append(_change("op_added", key))
        elif b is None:
            if a.name in new_names:
                kept = ", ".join(sorted(_key(o) for o in after.ops if o.name == a.name))
                changes.append(_change("overload_removed", key, kept=kept))
            else:
                changes.append(_change("op_removed", key))
        else:
            changes.extend(_compare_args(key, a, b))
            changes.extend(_compare_returns(key, a, b))
            verdicts.append(_torch_verdict(key, a, b))
    return BcReport(chosen, tuple(changes), tuple(verdicts))
