"""The catalog of finding codes: each code's severity, message and fix, in one table, and findings made from it.

A code is stable once released; docs/errors.md lists every code of `CODES` (a test checks it). The types
(`Code`, `Severity`, `Finding`) are in `findings.py`.
"""

from __future__ import annotations

from typing import Any

from opwire.schema import models as m
from opwire.validation.findings import EFFECT_ORDER, EFFECT_SEVERITY, Code, Effect, Finding, Severity

__all__ = ["CODES", "finding", "node_finding"]


def _bc(code: str, effects: tuple[Effect, Effect, Effect, Effect], summary: str, message: str, fix: str) -> Code:
    """A bc-check code: severity derived from its effects (written once, here)."""
    worst = min(effects, key=EFFECT_ORDER.index)
    return Code(code, EFFECT_SEVERITY[worst], summary, message, fix, effects)


_E, _W, _I = Severity.ERROR, Severity.WARNING, Severity.INFO
_B, _S, _C = Effect.BREAKING, Effect.SILENT, Effect.COMPATIBLE

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
        "if None means 'not given', declare '{arg}' optional: `{type}? {arg}=None`; otherwise give '{arg}' a "
        "default {type} can carry, or make it required",
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
        "{op}: torch.library.opcheck {test} failed on {samples}: {error}",
        "{how}",
    ),
    # the round trip of `ops validate --sample-inputs`: record, serialize, replay (roundtrip_check.py)
    Code(
        "roundtrip_not_recorded",
        _I,
        "no call of the op reached opwire's recorder (it decomposes above the Python dispatch key)",
        "{op}: on {samples}, no call of {target} reached the recorder; recorded {recorded}",
        "nothing to do if the decomposition is intended; register a backend kernel to record the op itself",
    ),
    Code(
        "roundtrip_record_failed",
        _E,
        "calling the op under `opwire.record` failed, or no Argument member carries the call",
        "{op}: on {samples}, {what}",
        "{how}",
    ),
    Code(
        "roundtrip_serialize_failed",
        _E,
        "a recorded trace of the op does not come back equal from JSON or compact Thrift",
        "{op}: on {samples}, {fmt}: {detail}",
        "report it to opwire with the sample input: every recorded trace must survive every codec",
    ),
    Code(
        "roundtrip_replay_failed",
        _E,
        "replaying the recorded call under a default policy does not reproduce its outputs",
        "{op}: on {samples}, replay under {policies}: {mismatches}, first: {first}",
        "{fix}",
    ),
    Code(
        "generator_argument",
        _W,
        "a `Generator?` argument: no exported program or trace carries a generator's state",
        "{op}: argument '{arg}' has type {type}; torch.export cannot put a torch.Generator in a program and an "
        "opwire trace does not carry its state, so a call that passes one is recorded as drawing from the default "
        "generator and replay compares its outputs' dtype, shape and strides only{tagged}",
        "to make the op export- and replay-friendly, drop '{arg}' and draw from the default generator (callers "
        "seed it with torch.manual_seed), or take the randomness as an input (a seed int or a tensor of random "
        "values){tag_fix}",
    ),
    # node comparison (`opwire run --compare-nodes`, opwire/view/runs.py): one finding per top-level node
    Code(
        "node_match",
        Severity.OK,
        "every output of a node matches the saved run within tolerance",
        "{what}",
        "nothing to do",
    ),
    Code(
        "node_mismatch",
        _E,
        "an output of a node differs from the saved run in dtype, shape or values",
        "{what}",
        "start at the first divergence (`opwire view PROGRAM --findings F.json`, press F): its inputs matched, so "
        "its kernel computes differently in the two runs (torch version, device, library); later nodes usually "
        "differ because their inputs do; raise --rtol/--atol if the difference is acceptable",
    ),
    Code(
        "node_strides",
        _W,
        "only the strides or storage offset of a node's outputs differ from the saved run",
        "{what}",
        "nothing to do unless later code depends on the memory layout; the kernel returns another layout in this run",
    ),
    Code(
        "node_not_saved",
        _I,
        "none of a node's outputs is in the saved run",
        "{what}",
        "compare against a .nodes file saved from the same program: opwire run PROGRAM --save-nodes F.nodes",
    ),
    Code(
        "node_failed",
        _E,
        "the run stopped at this node",
        "{what}",
        "the message is the error the node raised; fix its cause as `opwire run` without --compare-nodes reports it",
    ),
    # replay (`opwire replay --json` findings, opwire/validation/from_replay.py): one per mismatch, skip, drift
    Code(
        "replay_mismatch",
        _E,
        "an output of a replayed call differs from the recording",
        "call {index} {op} {output}: {kind} mismatch: {detail}",
        "start at the report's first divergence: its inputs matched the recording, so the op computes differently "
        "here (torch version, device, kernel, nondeterminism); raise --rtol/--atol if the difference is acceptable",
    ),
    Code(
        "replay_skipped",
        _W,
        "a call the recording kept only as a placeholder is not replayed",
        "call {index} {op}: not replayed: {reason}",
        "the reason says why the call was not recorded in full; `opwire ops validate {op}` names an argument or "
        "return no Argument member carries",
    ),
    Code(
        "replay_schema_drift",
        _W,
        "an op's schema in this process differs from the recorded one",
        "{drift}",
        "replay with the torch and op libraries the trace was recorded with, or check with `opwire ops bc-check` "
        "that the new schema reads old calls the same way",
    ),
    # bc-check: one code per change class; the severity shown is the change's worst effect
    _bc(
        "op_removed",
        (_B, _B, _B, _B),
        "an op (every overload of it) was removed",
        "{op}: the op was removed; files and callers that use it fail to resolve it",
        "keep the op (deprecate it first) or bump the library's major version",
    ),
    _bc(
        "overload_removed",
        (_B, _B, _B, _B),
        "one overload of an op was removed",
        "{op}: the overload was removed (the op keeps {kept}); files and callers naming it fail to resolve it",
        "keep the overload, or bump the library's major version",
    ),
    _bc(
        "op_added",
        (_C, _C, _C, _C),
        "a new op or overload",
        "{op}: new op or overload",
        "nothing to do",
    ),
    _bc(
        "argument_removed",
        (_B, _B, _B, _B),
        "an argument was removed",
        "{op}: argument '{arg}' ({type}) was removed; calls and files that pass it no longer bind",
        "keep the argument (ignore it in the kernel) or add a new overload without it",
    ),
    _bc(
        "argument_renamed",
        (_B, _B, _B, _B),
        "an argument was renamed",
        "{op}: argument '{arg}' was renamed to '{new}'; files bind arguments by name and keyword callers "
        "pass the old name",
        "keep the old name, or add a new overload with the new name",
    ),
    _bc(
        "argument_reordered",
        (_B, _B, _B, _B),
        "positional arguments changed order",
        "{op}: positional arguments changed order from ({old}) to ({new}); positional callers and "
        "AOTInductor's flattened int/tensor arrays pass values to the wrong arguments",
        "restore the old order, or add a new overload",
    ),
    _bc(
        "argument_retyped",
        (_B, _B, _B, _B),
        "an argument changed type",
        "{op}: argument '{arg}' changed type from {old} to {new}; old calls and files carry values of the old type",
        "keep the old type, or add a new overload with the new type",
    ),
    _bc(
        "argument_widened",
        (_C, _C, _C, _C),
        "an argument changed to a type that accepts every value of the old one",
        "{op}: argument '{arg}' changed type from {old} to {new}, which accepts every Argument member {old} "
        "accepted; old calls and files still bind",
        "nothing to do",
    ),
    _bc(
        "argument_added_no_default",
        (_B, _B, _B, _B),
        "a new argument without a default",
        "{op}: new argument '{arg}' ({type}) has no default; old calls and files do not pass it",
        "give '{arg}' a default value",
    ),
    _bc(
        "argument_added_with_default",
        (_B, _B, _B, _C),
        "a new argument with a default",
        "{op}: new argument '{arg}' ({type} = {default}); old calls and FROM_SCHEMA files take the default, "
        "REQUIRE_SERIALIZED files lack it and REQUIRE_CALLER callers do not pass it{where}",
        "replay old REQUIRE_SERIALIZED files with policy FROM_SCHEMA, or add the argument as a new overload",
    ),
    _bc(
        "default_changed",
        (_S, _C, _C, _S),
        "an argument's default value changed",
        "{op}: the default of argument '{arg}' changed from {old} to {new}; old FROM_SCHEMA files that left it "
        "out silently run with the new default",
        "keep the old default, or write files with policy REQUIRE_SERIALIZED so they carry every value",
    ),
    _bc(
        "default_removed",
        (_B, _C, _C, _B),
        "an argument lost its default",
        "{op}: argument '{arg}' lost its default {old}; callers and FROM_SCHEMA files that left it out no longer bind",
        "keep the default",
    ),
    _bc(
        "default_added",
        (_C, _C, _C, _C),
        "an argument gained a default",
        "{op}: argument '{arg}' gained the default {new}",
        "nothing to do",
    ),
    _bc(
        "kwarg_only_changed",
        (_B, _C, _C, _C),
        "an argument moved between positional and keyword-only",
        "{op}: argument '{arg}' became {new}; {consequence}",
        "keep the argument {old}, or add a new overload",
    ),
    _bc(
        "alias_changed",
        (_B, _B, _B, _B),
        "an argument's or return's alias/mutation annotation changed",
        "{op}: {what} changed its alias annotation from {old} to {new}; exported graphs were functionalized "
        "against the old mutation and aliasing contract",
        "keep the annotation, or add a new overload (e.g. an in-place `_` variant)",
    ),
    _bc(
        "return_changed",
        (_B, _B, _B, _B),
        "the returns changed",
        "{op}: returns changed from ({old}) to ({new}); files and callers unpack the old outputs",
        "keep the returns, or add a new overload",
    ),
)

CODES: dict[str, Code] = {c.code: c for c in _TABLE}
"""Every finding code by name, with its severity, summary and message/fix templates (docs/errors.md lists each)."""


def node_finding(code: str, node: str, differences: list[m.NodeDifference] | None = None, **fields: Any) -> m.Finding:
    """A finding of catalog code `code` about the top-level node `node` (node comparison), as the IDL record."""
    entry = CODES[code]
    values = {"node": node, **fields}
    return m.Finding(
        code=code,
        severity=entry.severity.value,
        node=node,
        message=entry.message.format(**values),
        fix=entry.fix.format(**values),
        differences=differences,
    )


def finding(code: str, op: str, **fields: Any) -> Finding:
    """A finding of catalog code `code` about `op`, its templates filled with `fields`."""
    entry = CODES[code]
    values = {"op": op, **fields}
    return Finding(code, entry.severity, op, entry.message.format(**values), entry.fix.format(**values))
