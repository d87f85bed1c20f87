"""The catalog of op-validation finding codes: each code's severity, message and fix, in one table.

`ops validate` and `bc-check` report findings as data, never as exceptions. A code is stable once
released; docs/errors.md lists every code of `CODES` (a test checks it).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

__all__ = ["CODES", "Code", "Finding", "Severity", "finding"]


class Severity(str, enum.Enum):
    """How bad a finding is: an error fails `ops validate`, a warning or info does not."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


@dataclass(frozen=True)
class Code:
    """One finding code: its severity, a one-line summary for the docs, and message/fix templates."""

    code: str
    severity: Severity
    summary: str
    message: str
    fix: str


@dataclass(frozen=True)
class Finding:
    """One thing op validation found about one op."""

    code: str
    severity: Severity
    op: str
    message: str
    fix: str

    def __str__(self) -> str:
        """Two lines, as `opwire ops validate` prints them: severity, code and message; then the fix."""
        return f"{self.severity.value} {self.code}: {self.message}\n  fix: {self.fix}"

    def to_json(self) -> dict[str, str]:
        """The finding as JSON-ready data."""
        return {
            "code": self.code,
            "severity": self.severity.value,
            "op": self.op,
            "message": self.message,
            "fix": self.fix,
        }


_E, _W, _I = Severity.ERROR, Severity.WARNING, Severity.INFO

_TABLE: tuple[Code, ...] = (
    Code(
        "schema_missing",
        _E,
        "kernels are registered for an op that has no schema",
        "{op}: kernels are registered for {keys} but no schema is defined; torch.export, the proxy executor "
        "and opwire cannot bind a call to an op without a schema",
        "define the op (torch.library.define, Library.define or m.def in TORCH_LIBRARY) before registering "
        "kernels for it, in every process that loads the kernels",
    ),
    Code(
        "unserializable_argument",
        _E,
        "an argument type that no Argument member can carry",
        "{op}: argument '{arg}' has type {type}, which no Argument member can carry; {step}",
        "change '{arg}' to a serializable type ({hint}), or keep the op out of exported graphs",
    ),
    Code(
        "unserializable_return",
        _E,
        "a return type that no Argument member can carry",
        "{op}: return {index} has type {type}, which no Argument member can carry; {step}",
        "return serializable types ({hint}), or keep the op out of exported graphs",
    ),
    Code(
        "unrepresentable_default",
        _E,
        "a default value that the argument's Argument members cannot carry",
        "{op}: the default of argument '{arg}' ({type} = {default}) cannot be written as {members}: {reason}; "
        "a serialized call that spells out every argument cannot be written",
        "give '{arg}' a default its type can carry, or make it required",
    ),
    Code(
        "aoti_unsupported_argument",
        _W,
        "an argument type torch 2.13's AOTInductor proxy executor cannot pass",
        "{op}: argument '{arg}' has type {type}; {behaviour}",
        "if the op must run under AOTInductor, change '{arg}' to a type the C++ proxy executor handles "
        "(Tensor, Tensor[], int, SymInt, int[], float, bool, str, ScalarType, Device, Layout, MemoryFormat)",
    ),
    Code(
        "aoti_unsupported_return",
        _W,
        "a return type torch 2.13's AOTInductor proxy executor cannot hand back",
        "{op}: return {index} has type {type}; {behaviour}",
        "if the op must run under AOTInductor, return Tensors (or a list of Tensors) and pass other results as tensors",
    ),
    Code(
        "no_fake_impl",
        _E,
        "no fake (meta) implementation: export and AOTInductor cannot trace the op",
        "{op}: no fake implementation is registered; torch.export and AOTInductor trace with FakeTensors "
        'and fail on this op ("no fake impl registered" / UnsupportedOperatorException)',
        "{how}",
    ),
    Code(
        "dead_batching_rule",
        _W,
        "a FuncTorchBatched kernel next to a CompositeImplicitAutograd kernel",
        "{op}: has a FuncTorchBatched kernel and a CompositeImplicitAutograd kernel; when an autograd "
        "transform runs inside vmap (vmap(grad(f)), jacrev, hessian) the op decomposes before reaching "
        "FuncTorchBatched, so the batching rule is dead there and only plain vmap uses it",
        "register the op's kernels as CompositeExplicitAutograd (plus an autograd formula) if it needs its "
        "own batching rule, or drop the FuncTorchBatched registration and let vmap use the decomposition",
    ),
    Code(
        "privateuse1_no_autograd",
        _W,
        "a PrivateUse1 kernel with no AutogradPrivateUse1 and no composite kernel",
        "{op}: has a PrivateUse1 kernel but no AutogradPrivateUse1, Autograd or CompositeImplicitAutograd "
        "kernel; backward through it on the '{backend}' device has no formula: torch 2.13's autograd fallback "
        'warns "an autograd kernel was not registered to the Autograd key(s)" and yields wrong gradients, '
        "older releases fail with \"Could not run ... from the 'Autograd{backend}' backend\"",
        "register an autograd formula (torch.library.register_autograd, or a kernel for Autograd / "
        "AutogradPrivateUse1), or a CompositeImplicitAutograd kernel",
    ),
    Code(
        "vmap_fallback",
        _I,
        "vmap runs the op through the slow for-loop fallback",
        "{op}: has no batching rule; torch.vmap runs it once per batch element through the for-loop "
        'fallback and stacks the results (slow, and warns "There is a performance drop")',
        "register a vmap rule with torch.library.register_vmap",
    ),
    Code(
        "vmap_unsupported",
        _W,
        "torch.vmap fails on the op",
        "{op}: has no batching rule and the vmap for-loop fallback cannot run it ({reason}); torch.vmap "
        'raises "Batching rule not implemented for {name}"',
        "register a vmap rule with torch.library.register_vmap",
    ),
    Code(
        "opcheck_failed",
        _E,
        "torch.library.opcheck failed on a sample input",
        "{op}: torch.library.opcheck {test} failed on sample {sample}: {error}",
        "{how}",
    ),
    # bc-check: one code per change class; the severity shown is the change's worst effect
    Code(
        "op_removed",
        _E,
        "an op (every overload of it) was removed",
        "{op}: the op was removed; files and callers that use it fail to resolve it",
        "keep the op (deprecate it first) or bump the library's major version",
    ),
    Code(
        "overload_removed",
        _E,
        "one overload of an op was removed",
        "{op}: the overload was removed (the op keeps {kept}); files and callers naming it fail to resolve it",
        "keep the overload, or bump the library's major version",
    ),
    Code(
        "op_added",
        _I,
        "a new op or overload",
        "{op}: new op or overload",
        "nothing to do",
    ),
    Code(
        "argument_removed",
        _E,
        "an argument was removed",
        "{op}: argument '{arg}' ({type}) was removed; calls and files that pass it no longer bind",
        "keep the argument (ignore it in the kernel) or add a new overload without it",
    ),
    Code(
        "argument_renamed",
        _E,
        "an argument was renamed",
        "{op}: argument '{arg}' was renamed to '{new}'; files bind arguments by name and keyword callers "
        "pass the old name",
        "keep the old name, or add a new overload with the new name",
    ),
    Code(
        "argument_reordered",
        _E,
        "positional arguments changed order",
        "{op}: positional arguments changed order from ({old}) to ({new}); positional callers and "
        "AOTInductor's flattened int/tensor arrays pass values to the wrong arguments",
        "restore the old order, or add a new overload",
    ),
    Code(
        "argument_retyped",
        _E,
        "an argument changed type",
        "{op}: argument '{arg}' changed type from {old} to {new}; old calls and files carry values of the old type",
        "keep the old type, or add a new overload with the new type",
    ),
    Code(
        "argument_widened",
        _I,
        "an argument changed to a type that accepts every value of the old one",
        "{op}: argument '{arg}' changed type from {old} to {new}, which accepts every Argument member {old} "
        "accepted; old calls and files still bind",
        "nothing to do",
    ),
    Code(
        "argument_added_no_default",
        _E,
        "a new argument without a default",
        "{op}: new argument '{arg}' ({type}) has no default; old calls and files do not pass it",
        "give '{arg}' a default value",
    ),
    Code(
        "argument_added_with_default",
        _E,
        "a new argument with a default",
        "{op}: new argument '{arg}' ({type} = {default}); old calls and FROM_SCHEMA files take the default, "
        "REQUIRE_SERIALIZED files lack it and REQUIRE_CALLER callers do not pass it{where}",
        "replay old REQUIRE_SERIALIZED files with policy FROM_SCHEMA, or add the argument as a new overload",
    ),
    Code(
        "default_changed",
        _W,
        "an argument's default value changed",
        "{op}: the default of argument '{arg}' changed from {old} to {new}; old FROM_SCHEMA files that left it "
        "out silently run with the new default",
        "keep the old default, or write files with policy REQUIRE_SERIALIZED so they carry every value",
    ),
    Code(
        "default_removed",
        _E,
        "an argument lost its default",
        "{op}: argument '{arg}' lost its default {old}; callers and FROM_SCHEMA files that left it out no longer bind",
        "keep the default",
    ),
    Code(
        "default_added",
        _I,
        "an argument gained a default",
        "{op}: argument '{arg}' gained the default {new}",
        "nothing to do",
    ),
    Code(
        "kwarg_only_changed",
        _E,
        "an argument moved between positional and keyword-only",
        "{op}: argument '{arg}' became {new}; {consequence}",
        "keep the argument {old}, or add a new overload",
    ),
    Code(
        "alias_changed",
        _E,
        "an argument's or return's alias/mutation annotation changed",
        "{op}: {what} changed its alias annotation from {old} to {new}; exported graphs were functionalized "
        "against the old mutation and aliasing contract",
        "keep the annotation, or add a new overload (e.g. an in-place `_` variant)",
    ),
    Code(
        "return_changed",
        _E,
        "the returns changed",
        "{op}: returns changed from ({old}) to ({new}); files and callers unpack the old outputs",
        "keep the returns, or add a new overload",
    ),
)

CODES: dict[str, Code] = {c.code: c for c in _TABLE}


def finding(code: str, op: str, **fields: Any) -> Finding:
    """A finding of catalog code `code` about `op`, its templates filled with `fields`."""
    entry = CODES[code]
    values = {"op": op, **fields}
    return Finding(code, entry.severity, op, entry.message.format(**values), entry.fix.format(**values))
