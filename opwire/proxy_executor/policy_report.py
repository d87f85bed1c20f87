"""What the op policy says of an op: admitted, admitted after which precondition, or refused and why.

`opwire ops policy OP...` prints it; `explain("aten::lstm")` gives one `OpVerdict` per overload.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from opwire.errors import BindError, OpwireError
from opwire.proxy_executor import policy_rules
from opwire.proxy_executor.allowlist import policy_entry
from opwire.proxy_executor.exec_policy import TORCH_NAMESPACES, ExecPolicy, allow_name
from opwire.proxy_executor.targets import resolve
from opwire.schema import models as m

__all__ = ["OpVerdict", "explain", "policy_output"]

_SOURCES = {
    "public": "a public ATen op: written for Python callers, it validates its own arguments",
    "core": "tagged `core` by torch: the core ATen IR holds it",
    "autograd": "named by autograd's derivatives.yaml: torch's public API puts it into programs and recordings",
    "reviewed": "an internal kernel opwire's review admitted",
}


@dataclass(frozen=True)
class OpVerdict:
    """The policy's answer for one overload."""

    op: str
    """"ns::op.overload" ("ns::op" for the default overload)."""
    verdict: str
    """"admitted", "precondition", "refused" or "trusted" (a namespace torch does not ship: the user's library)."""
    detail: str
    """The source (admitted), the family (precondition) or the category (refused)."""
    reason: str
    """The sentence saying why."""
    allow: str | None = None
    """What `allow_ops` / `--allow-op` takes to run it anyway (refused ops only)."""

    def to_dict(self) -> dict[str, Any]:
        """The verdict as a JSON-ready dict."""
        return asdict(self)

    def __str__(self) -> str:
        if self.verdict == "refused":
            return f"{self.op}: refused ({self.detail}): {self.reason}; to run it anyway: --allow-op {self.allow}"
        if self.verdict == "precondition":
            return f"{self.op}: admitted after the {self.detail} precondition: {self.reason}"
        return f"{self.op}: {self.verdict} ({self.detail}): {self.reason}"


def _overloads(name: str) -> list[Any]:
    """The OpOverloads `name` ("ns::op" for every overload, "ns::op.overload" for one) names."""
    import torch

    ns, sep, rest = name.partition("::")
    if not sep or not rest:
        raise BindError(f"expected an op such as aten::add or aten::add.Tensor, got {name!r}")
    op, _, overload = rest.partition(".")
    try:
        packet = getattr(getattr(torch.ops, ns), op)
        names = [overload] if overload else list(packet.overloads())
        return [getattr(packet, o) for o in names]
    except (AttributeError, RuntimeError):
        raise BindError(
            f"{name!r} is not a registered op; load its library first (--import MODULE or --load-library PATH.so)"
        ) from None


def _one(overload: Any) -> OpVerdict:
    s = overload._schema
    op = f"{s.name}.{s.overload_name}" if s.overload_name else s.name
    ns = s.name.partition("::")[0]
    if ns not in TORCH_NAMESPACES:
        return OpVerdict(op, "trusted", "user library", "an op of a library you imported (opwire trusts it)")
    try:
        refusal = ExecPolicy().allowed(resolve(op))
    except OpwireError as exc:
        return OpVerdict(op, "refused", "unreadable", str(exc), op)
    entry = policy_entry(op)
    if refusal is not None:
        return OpVerdict(op, "refused", refusal.category, refusal.reason, allow_name(refusal))
    assert entry is not None  # admitted ops of torch namespaces are the policy file's
    cls, detail = entry
    if cls == "precondition":
        return OpVerdict(op, "precondition", detail, policy_rules.FAMILIES[detail][0])
    reason = _SOURCES.get(detail, detail)
    if detail == "reviewed":
        reason += f": {policy_rules.internal_reason(s.name.partition('::')[2]) or ''}".rstrip(": ")
    return OpVerdict(op, "admitted", detail, reason)


def explain(name: str) -> list[OpVerdict]:
    """The policy's verdict on every overload `name` names ("aten::lstm", "aten::lstm.input")."""
    return [_one(o) for o in _overloads(name)]


def policy_output(verdicts: list[OpVerdict]) -> m.OpPolicyOutput:
    """The `OpPolicyOutput` record of `verdicts` (`opwire ops policy --json`), with the one `--allow-op` flag."""
    allow = list(dict.fromkeys(v.allow for v in verdicts if v.verdict == "refused" and v.allow))
    return m.OpPolicyOutput(
        refused=sum(v.verdict == "refused" for v in verdicts),
        allow="--allow-op " + ",".join(allow) if allow else None,
        verdicts=[m.OpPolicyVerdict(**v.to_dict()) for v in verdicts],
    )
