"""`opwire.validate_op`: will a custom op survive export, serialization, AOTInductor and vmap?

One `OpReport` per overload: its parsed schema, kernels per dispatch key, fake implementation, vmap route
and findings (codes in `findings.CODES`, documented in docs/validation.md and docs/errors.md).
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from opwire.errors import OpValidationError
from opwire.schema import models as m
from opwire.schema.ops import OpSchema, op_schema
from opwire.serde.json import to_jsonable
from opwire.validation import dispatch_keys
from opwire.validation.catalog import finding
from opwire.validation.findings import Finding, Severity
from opwire.validation.opcheck import SampleInputs, opcheck_findings
from opwire.validation.roundtrip_check import roundtrip_findings
from opwire.validation.type_checks import aoti_findings, generator_findings, serializability_findings

__all__ = [
    "CHECKS",
    "SAMPLE_CHECKS",
    "Finding",
    "OpReport",
    "Severity",
    "checks_run",
    "format_reports",
    "resolve_target",
    "validate_op",
    "validation_output",
]


@dataclass(frozen=True)
class OpReport:
    """Everything op validation learned about one operator overload."""

    op: str
    schema: m.OpSchemaSnapshot | None
    kernels: tuple[dispatch_keys.KernelInfo, ...]
    fake_impl: str | None
    vmap_route: dispatch_keys.VmapRoute | None
    findings: tuple[Finding, ...]

    @property
    def errors(self) -> tuple[Finding, ...]:
        """The findings of severity error."""
        return tuple(f for f in self.findings if f.severity is Severity.ERROR)

    @property
    def mutated_args(self) -> tuple[str, ...]:
        """Names of the arguments the op writes to (alias annotations with "!")."""
        if self.schema is None:
            return ()
        return tuple(a.name for a in self.schema.arguments if a.alias_info and a.alias_info.endswith("!"))

    def __str__(self) -> str:
        """The report as `opwire ops validate` prints it: the op, schema, kernels, fake impl, vmap route, findings."""
        lines = [self.op]
        if self.schema is not None:
            lines.append(f"  schema: {self.schema.schema_str}")
        registered = [k.key for k in self.kernels if k.registered]
        computed = [k.key for k in self.kernels if not k.registered and k.runnable]
        extra = f" (+{_count(len(computed), 'key')} computed from them; --json lists every key)" if computed else ""
        lines.append(f"  kernels: {' '.join(registered) or 'none registered'}{extra}")
        if self.schema is not None:
            lines.append(f"  fake impl: {self.fake_impl or 'none'}")
        if self.vmap_route is not None:
            lines.append(f"  vmap: {self.vmap_route.route} ({self.vmap_route.detail})")
        lines += [textwrap.indent(str(f), "  ") for f in self.findings]
        return "\n".join(lines)

    def to_model(self) -> m.OpValidationReport:
        """The report as the IDL's `OpValidationReport` record."""
        return m.OpValidationReport(
            op=self.op,
            op_schema=self.schema,
            mutated_args=list(self.mutated_args),
            kernels=[k.to_model() for k in self.kernels],
            fake_impl=self.fake_impl,
            vmap_route=None if self.vmap_route is None else self.vmap_route.to_model(),
            findings=[f.to_model() for f in self.findings],
        )

    def to_json(self) -> dict[str, Any]:
        """The report as JSON-ready data (the JSON codec's form of `to_model()`)."""
        data: dict[str, Any] = to_jsonable(self.to_model())
        return data


def validation_output(reports: Sequence[OpReport], checks: Sequence[str]) -> m.OpValidationOutput:
    """What `opwire ops validate --json` prints: the error count, the checks that ran and every report."""
    errors = sum(len(r.errors) for r in reports)
    return m.OpValidationOutput(errors=errors, checks=list(checks), reports=[r.to_model() for r in reports])


def format_reports(reports: Sequence[OpReport], checks: Sequence[str] = ()) -> str:
    """Every report, one line counting ops, errors and warnings, then the checks that ran (`checks_run`):
    what `opwire ops validate` prints."""
    errors = sum(len(r.errors) for r in reports)
    warnings = sum(1 for r in reports for f in r.findings if f.severity is Severity.WARNING)
    lines = [
        *map(str, reports),
        f"{_count(len(reports), 'op')}: {_count(errors, 'error')}, {_count(warnings, 'warning')}",
    ]
    if checks:
        lines.append(f"checks run: {'; '.join(checks)}")
        if not set(SAMPLE_CHECKS) & set(checks):
            lines.append(
                "  (--sample-inputs MODULE:FUNC adds torch.library.opcheck and a record/serialize/replay round trip)"
            )
    return "\n".join(lines)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _split(name: str) -> tuple[str, str]:
    """ "ns::op.overload" -> ("ns::op", "overload"); the default overload is ""."""
    ns, _, rest = name.partition("::")
    op, _, overload = rest.partition(".")
    return f"{ns}::{op}", overload


def resolve_target(target: str) -> list[str]:
    """The dispatcher names ("ns::op" or "ns::op.overload") a target denotes, sorted."""
    if not isinstance(target, str) or not target or target.count("::") > 1 or target.startswith("::"):
        raise OpValidationError(
            f"expected a target 'ns::op', 'ns::op.overload' or a namespace 'ns', got {target!r}; "
            "name an operator as torch.ops spells it, e.g. 'mylib::foo.default'"
        )
    names = sorted(torch._C._dispatch_get_all_op_names())
    if "::" not in target:
        found = [n for n in names if n.startswith(target + "::")]
    else:
        base, overload = _split(target)
        if overload in ("", "default"):
            exact = base if overload == "default" else None
            found = [n for n in names if _split(n)[0] == base and (exact is None or n == exact)]
        else:
            found = [n for n in names if n == target]
    if not found:
        raise OpValidationError(
            f"no operator matches target {target!r}: expected a registered op, overload or namespace; "
            "load the library that defines it first (--import MODULE or --load-library PATH.so)"
        )
    return found


def _overload(name: str) -> torch._ops.OpOverload | None:
    """The live OpOverload of a dispatcher name, or None when no schema is registered for it."""
    base, overload = _split(name)
    try:
        torch._C._dispatch_find_schema_or_throw(base, overload)
    except RuntimeError:
        return None
    ns, _, op = base.partition("::")
    packet = getattr(getattr(torch.ops, ns), op)
    return getattr(packet, overload or "default")  # type: ignore[no-any-return]


def _display(name: str) -> str:
    """The name with an explicit overload, as reports show it: "ns::op.default"."""
    return name if "." in name.partition("::")[2] else f"{name}.default"


def _no_schema_report(name: str) -> OpReport:
    keys = sorted(k for k, _ in dispatch_keys._registration_files(name).items())
    keys_text = ", ".join(keys) if keys else "no dispatch key"
    f = finding("schema_missing", _display(name), keys=keys_text)
    return OpReport(_display(name), None, dispatch_keys.kernels(name), None, None, (f,))


def _fake_fix(op: torch._ops.OpOverload) -> str:
    from torch._library import custom_ops

    name = op._name
    if custom_ops._maybe_get_opdef(name) is not None:
        func = name.partition("::")[2].split(".")[0]
        return f'register one with @{func}.register_fake or torch.library.register_fake("{name}")'
    return (
        f'register one with torch.library.register_fake("{name}"), or a Meta kernel '
        "(TORCH_LIBRARY_IMPL(ns, Meta, m) in C++)"
    )


def _dispatch_findings(
    shown: str, op: torch._ops.OpOverload, infos: tuple[dispatch_keys.KernelInfo, ...]
) -> list[Finding]:
    registered = {k.key for k in infos if k.registered}
    out: list[Finding] = []
    if dispatch_keys.fake_impl_source(op) is None:
        out.append(finding("no_fake_impl", shown, how=_fake_fix(op)))
    if "FuncTorchBatched" in registered and "CompositeImplicitAutograd" in registered:
        out.append(finding("dead_batching_rule", shown))
    autograd = {"AutogradPrivateUse1", "Autograd", "CompositeImplicitAutograd"}
    if "PrivateUse1" in registered and not registered & autograd:
        backend = torch._C._get_privateuse1_backend_name()
        label = "PrivateUse1" if backend == "privateuseone" else backend
        out.append(finding("privateuse1_no_autograd", shown, backend=label))
    return out


def _vmap_findings(shown: str, op: torch._ops.OpOverload, route: dispatch_keys.VmapRoute) -> list[Finding]:
    if route.route not in ("fallback", "decomposition", "unsupported"):
        return []
    blocker = dispatch_keys.fallback_blocker(op._schema)
    if blocker is None:
        return [finding("vmap_fallback", shown)]
    return [finding("vmap_unsupported", shown, reason=blocker, name=op._schema.name)]


def _report(name: str, samples: SampleInputs | None) -> OpReport:
    op = _overload(name)
    if op is None:
        return _no_schema_report(name)
    shown = _display(name)
    schema: OpSchema = op_schema(op)
    infos = dispatch_keys.kernels(name)
    route = dispatch_keys.vmap_route(op, infos)
    found = [
        *serializability_findings(shown, schema),
        *aoti_findings(shown, schema),
        *generator_findings(shown, schema, torch.Tag.nondeterministic_seeded in op.tags),
        *_dispatch_findings(shown, op, infos),
        *_vmap_findings(shown, op, route),
    ]
    if samples is not None:
        found.extend(opcheck_findings(shown, op, samples, has_fake=dispatch_keys.fake_impl_source(op) is not None))
        typed = any(f.code in _TYPE_CODES for f in found)
        found.extend(roundtrip_findings(shown, op, samples, types_reported=typed))
    tags = tuple(sorted(t.name for t in op.tags))
    return OpReport(shown, schema.to_snapshot(tags), infos, dispatch_keys.fake_impl_source(op), route, tuple(found))


_TYPE_CODES = frozenset({"unserializable_argument", "unserializable_return", "unrepresentable_default"})

CHECKS = (
    "argument and return types an Argument member carries",
    "types torch 2.13's AOTInductor proxy executor passes",
    "kernels per dispatch key and a fake implementation",
    "the vmap route",
)
SAMPLE_CHECKS = (
    "torch.library.opcheck on the sample inputs",
    "record, serialize and replay of the sample calls",
)


def checks_run(with_samples: bool) -> tuple[str, ...]:
    """What `validate_op` checks: every op's schema and registrations, plus the sample checks when given samples."""
    return CHECKS + SAMPLE_CHECKS if with_samples else CHECKS


def validate_op(target: str, *, sample_inputs: Callable[[str], Iterable[Any]] | None = None) -> list[OpReport]:
    """Validate every overload a target ("ns::op", "ns::op.overload" or "ns") denotes, one report each.

    `sample_inputs(op_name)` may return `(args, kwargs)` pairs; `torch.library.opcheck` runs on each.
    """
    return [_report(name, sample_inputs) for name in resolve_target(target)]
