"""Schema-type checks of one op: serializability (from the `schema/ops.py` table) and AOTInductor support.

Which `Argument` members carry a type, and why none can, is `opwire.schema.ops`'s table; this module only
turns its answers into findings. The AOTInductor rules describe torch 2.13's C++ proxy executor
(`torch/csrc/inductor/aoti_torch/oss_proxy_executor.cpp`), which handles fewer types than the schema can.
"""

from __future__ import annotations

from opwire.schema import ops
from opwire.schema.ops import OpArg, OpSchema, SchemaType
from opwire.validation.catalog import finding
from opwire.validation.findings import Finding

__all__ = ["aoti_findings", "generator_findings", "serializability_findings"]

_HINT = "Tensor, Tensor?, Tensor[], int, SymInt, float, bool, str, Scalar, ScalarType, Device, lists of these"
_STEP = "torch.export.save and opwire cannot write a call of this op ({why})"
_AOTI_RETURN = (
    "torch 2.13's AOTInductor C++ proxy executor only hands Tensor and Tensor-list outputs of an extern kernel "
    "back to the compiled model; a {type} output fails when the compiled model runs the call"
)
_AOTI_ARG = (
    "torch 2.13's AOTInductor C++ proxy executor has no branch for {what} arguments of an extern kernel and "
    "fails when the compiled model loads the call"
)
_SCALAR_RETURNS = frozenset({"int", "SymInt", "bool", "SymBool", "float", "SymFloat", "Scalar", "str"})


def _why(why: str) -> str:
    """The ops-table reason without its leading "<type>: "."""
    return why.split(": ", 1)[1] if ": " in why else why


def _default_findings(name: str, arg: OpArg) -> list[Finding]:
    """A None default on a type no `as_none` member carries cannot be written out."""
    if not arg.has_default or arg.default is not None:
        return []
    members = ops.input_members(arg.parsed)
    if not members or "as_none" in members:
        return []
    return [
        finding(
            "unrepresentable_default",
            name,
            arg=arg.name,
            type=arg.type,
            default=arg.default_str,
            members="/".join(sorted(members)),
            reason="None needs as_none, which this type does not allow",
        )
    ]


def serializability_findings(name: str, schema: OpSchema) -> list[Finding]:
    """Errors for argument and return types (and defaults) no `Argument` member can carry."""
    out: list[Finding] = []
    for arg in schema.arguments:
        why = ops.why_not_carriable(arg.parsed, "input")
        if why is not None:
            step = _STEP.format(why=_why(why))
            out.append(finding("unserializable_argument", name, arg=arg.name, type=arg.type, step=step, hint=_HINT))
        else:
            out.extend(_default_findings(name, arg))
    for index, ret in enumerate(schema.returns):
        why = ops.why_not_carriable(ret.parsed, "return")
        if why is not None:
            step = _STEP.format(why=_why(why))
            out.append(finding("unserializable_return", name, index=index, type=ret.type, step=step, hint=_HINT))
    return out


def _aoti_arg_problem(t: SchemaType) -> str | None:
    """What about argument type `t` the C++ proxy executor cannot pass, or None.

    (torch 2.13's schema parser refuses `SymFloat`, so no registered op has a sym-float argument.)
    """
    if t.kind == "optional" and str(t.elem) == "Tensor":
        return "optional-tensor (Tensor?)"
    if t.kind == "list" and t.elem.kind == "list":
        return "nested-list"
    inner = t
    while inner.kind in ("optional", "list"):
        inner = inner.elem
    if inner.kind == "base" and inner.name == "complex":
        return "complex"
    if inner.kind == "base" and inner.name == "SymBool":
        return "sym-bool"
    return None


def aoti_findings(name: str, schema: OpSchema) -> list[Finding]:
    """Warnings for types torch 2.13's AOTInductor proxy executor cannot handle (serializable types only)."""
    out: list[Finding] = []
    for arg in schema.arguments:
        what = _aoti_arg_problem(arg.parsed)
        if what is not None and ops.why_not_carriable(arg.parsed, "input") is None:
            behaviour = _AOTI_ARG.format(what=what)
            out.append(finding("aoti_unsupported_argument", name, arg=arg.name, type=arg.type, behaviour=behaviour))
    for index, ret in enumerate(schema.returns):
        t = ret.parsed
        if t.kind == "optional":
            t = t.elem
        if t.kind == "base" and t.name in _SCALAR_RETURNS and ops.why_not_carriable(ret.parsed, "return") is None:
            behaviour = _AOTI_RETURN.format(type=ret.type)
            out.append(finding("aoti_unsupported_return", name, index=index, type=ret.type, behaviour=behaviour))
    return out


def generator_findings(name: str, schema: OpSchema, seeded: bool) -> list[Finding]:
    """A warning per `Generator?` argument (`seeded`: the op is tagged `nondeterministic_seeded`)."""
    out: list[Finding] = []
    for arg in schema.arguments:  # a non-optional Generator is already an unserializable_argument error
        inner = arg.parsed.elem if arg.parsed.kind == "optional" else None
        if inner is not None and inner.kind == "base" and inner.name == "Generator":
            tagged = (
                ""
                if seeded
                else (
                    "; the op is not tagged nondeterministic_seeded, so its calls without a generator are compared by "
                    "value and fail to replay"
                )
            )
            tag_fix = (
                ""
                if seeded
                else "; and tag it nondeterministic_seeded (tags=(torch.Tag.nondeterministic_seeded,) in "
                "torch.library.define or torch.library.custom_op) so replay and diff compare metadata, not values"
            )
            out.append(finding("generator_argument", name, arg=arg.name, type=arg.type, tagged=tagged, tag_fix=tag_fix))
    return out
