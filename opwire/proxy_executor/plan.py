"""Binding one serialized node to its target: a reusable plan of converters (built once per node).

`bind_node` is what the executor and the graph runner share: it checks names, members, the default policy
and the execution policy, and returns a `NodePlan` whose `args(lookup, defaults)` builds the kernel's
arguments, `invoke` calls it (with the node's preconditions checked first), `results` checks what came back
and `store` maps it onto the serialized output names; `prepared()` is the same for a node whose arguments
are all named values (the AOTInductor fast path).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from opwire.errors import BindError, KernelError, OpwireError, describe_exception
from opwire.proxy_executor.allowlist import allowlist
from opwire.proxy_executor.checks import Checks, check_sym_operands, checked_sym_result, node_checks
from opwire.proxy_executor.context import BindContext
from opwire.proxy_executor.convert import Converted, Lookup, convert
from opwire.proxy_executor.default_policy import DefaultPolicy
from opwire.proxy_executor.exec_policy import TORCH_NAMESPACES
from opwire.proxy_executor.fast_calls import prepare
from opwire.proxy_executor.outputs import check_span, describe, store_output
from opwire.proxy_executor.preconditions import family_of
from opwire.proxy_executor.run_budgets import while_loop_with_budget
from opwire.proxy_executor.targets import Target, resolve
from opwire.schema import models as m
from opwire.schema.ops import OpArg, input_members, return_members

__all__ = ["NodePlan", "bind_node"]

_FIXED_REFUSED = frozenset({"as_graph", "as_operator", "as_custom_obj"})


@dataclass
class NodePlan:
    """A bound node: callable, positional and keyword converters, caller-filled names, output checks."""

    where: str
    target: Target
    node: m.Node
    fn: Callable[..., Any]
    pos: list[Converted]
    kw: dict[str, Converted]
    caller: tuple[str, ...]
    returns: tuple[OpArg | None, ...]
    policy: DefaultPolicy
    missing: tuple[OpArg, ...] = ()
    fast: Any = field(default=None, repr=False)
    checks: Checks | None = None
    """What runs before the kernel (a precondition, the memory estimate): such plans take no fast path."""
    seeded: bool = False
    """The call may draw from a random generator (its entry point restores the generator's state)."""
    guarded: bool = True
    """`ProxyExecutor.call` runs it inside a RunGuard: everything but allowlisted, unseeded torch ops and library
    ops, which cannot change grad mode, modes, flags or the generator, and whose guard would cost more than the
    kernel (the executor runs those under the light guard, `fast_calls.Light`, which collects kernel warnings)."""
    views: frozenset[int] | None = field(default=None, repr=False)
    """The returns whose span `store` checks (`_view_returns`), worked out on the first store: it reads only the
    schema and the allowlist file, and took a sixth of an LSTM step's checks when worked out per call."""

    def prepared(self) -> Callable[[Mapping[str, Any]], dict[str, Any]] | None:
        """A fast call for the common shape (named or constant inputs, one tensor out), or None."""
        if self.fast is False:
            return None
        if self.fast is None:
            if self.views is None:
                self.views = _view_returns(self)
            self.fast = prepare(self, bool(self.views)) or False
        return self.fast or None

    def args(self, look: Lookup, defaults: Mapping[str, Any] | None) -> tuple[list[Any], dict[str, Any]]:
        """Positional and keyword values for one call."""
        try:
            pos = [c.const if c.get is None else c.get(look) for c in self.pos]
            kw = {k: (c.const if c.get is None else c.get(look)) for k, c in self.kw.items()}
        except KeyError as exc:
            raise BindError(
                f"{self.where}: refers to value {exc.args[0]!r}, which the values do not hold; "
                "pass it by its serialized name"
            ) from None
        for name in self.caller:
            if defaults is None or name not in defaults:
                raise BindError(
                    f"{self.where}: argument {name!r} is not in the file and the caller did not pass it; "
                    f"policy REQUIRE_CALLER needs it in defaults= (or choose FROM_SCHEMA to use the schema default)"
                )
            kw[name] = defaults[name]
        return pos, kw

    def estimate_ahead(self, values: Mapping[str, Any]) -> None:
        """The memory estimate of a call on `values` (stand-ins of the same shapes: meta tensors) run ahead, kept for
        the call (`Checks.estimate_ahead`); nothing raised (the call reports what is wrong with its values)."""
        if self.checks is None or self.checks.memory is None or self.checks.precondition is not None:
            return
        try:
            pos, kw = self.args(values.__getitem__, None)
        except Exception:  # the call converts its own values and reports what is wrong with them
            return
        self.checks.estimate_ahead(self.fn, pos, kw)

    def invoke(self, pos: list[Any], kw: dict[str, Any]) -> Any:
        """Call the kernel; whatever it raises becomes a KernelError naming the op and node."""
        if self.checks is not None:
            self.checks.before(self.fn, pos, kw)
        try:
            return self.fn(*pos, **kw)
        except OpwireError:
            raise  # a budget of the run, a subgraph's own error, a symbolic op's check: not the kernel's failure
        except Exception as exc:
            raise self.kernel_error(exc) from exc

    def kernel_error(self, exc: Exception) -> KernelError:
        """The KernelError wrapping what the kernel raised."""
        return KernelError(
            f"{self.where}: the kernel raised {describe_exception(exc)}; "
            "check the inputs' shapes, dtypes and devices against the op"
        )

    def results(self, result: Any) -> list[Any]:
        """The kernel's result as one value per serialized output."""
        n = len(self.node.outputs)
        if self.target.kind == "op":
            if len(self.returns) == 1:
                return [result]
            if len(self.returns) == 0:
                return []
            return list(result)
        if n == 1 and (self.node.is_hop_single_tensor_return or not isinstance(result, tuple)):
            return [result]
        if isinstance(result, (tuple, list)) and len(result) == n:
            return list(result)
        raise KernelError(f"{self.where}: the file names {n} outputs but the call returned {describe(result)}")

    def store(self, result: Any, out: dict[str, Any]) -> None:
        """Check `result` against the serialized outputs and put named values into `out`."""
        import torch

        views = self.views
        if views is None:
            views = self.views = _view_returns(self)
        for i, (arg, value) in enumerate(zip(self.node.outputs, self.results(result), strict=True)):
            if i in views and isinstance(value, torch.Tensor):
                check_span(value, f"{self.where} output {i}")
            store_output(arg, value, f"{self.where} output {i}", out)


def _view_returns(p: NodePlan) -> frozenset[int]:
    """The returns whose span is checked against their storage: views (an alias, no write) of ops whose geometry
    the file chooses unchecked by review: the `as_strided` family and torch ops run only because allow_ops names
    them. (torch's other views check their sizes against the storage themselves; checking every view cost a
    sixth of a small program's run.)"""
    schema = p.target.schema
    if p.target.kind != "op" or schema is None or schema.namespace not in TORCH_NAMESPACES:
        return frozenset()
    if family_of(schema.qualname) != "as_strided" and schema.qualname in allowlist():
        return frozenset()
    return frozenset(i for i, r in enumerate(p.returns) if r is not None and r.alias and not r.alias.endswith("!"))


def is_seeded(op: Any) -> bool:
    """Whether op overload `op` may draw from a random generator (torch tags it `nondeterministic_seeded`)."""
    import torch

    return torch.Tag.nondeterministic_seeded in getattr(op, "tags", ())


def bind_node(node: m.Node, where: str, policy: DefaultPolicy, ctx: BindContext) -> NodePlan:
    """Resolve `node.target` and bind its inputs by name; every problem is a BindError naming `where`."""
    target = resolve(node.target)
    where = f"{where} ({target.label})"
    if target.kind == "op":
        ctx.exec_policy.check(target, where)
        return _bind_op(target, node, where, policy, ctx)
    return _bind_other(target, node, where, policy, ctx)


def _bind_op(target: Target, node: m.Node, where: str, policy: DefaultPolicy, ctx: BindContext) -> NodePlan:
    schema = target.schema
    assert schema is not None
    if schema.is_vararg:
        raise BindError(f"{where}: the op takes varargs (...), which a serialized call cannot bind by name")
    given: dict[str, Converted] = {}
    for na in node.inputs:
        arg = schema.argument(na.name)
        if arg is None:
            names = ", ".join(a.name for a in schema.arguments)
            raise BindError(f"{where}: unknown argument {na.name!r}; the schema's arguments are {names}")
        if na.name in given:
            raise BindError(f"{where}: argument {na.name!r} is given twice; a call binds each argument once")
        allowed = input_members(arg.parsed)
        if na.arg.type not in allowed:
            raise BindError(
                f"{where}: argument {arg.name!r} of type {arg.type} cannot be carried by {na.arg.type}; "
                f"expected {' or '.join(sorted(allowed)) or 'nothing (no member carries this type)'}"
            )
        given[na.name] = convert(na.arg, f"{where} argument {arg.name!r}", ctx)
    pos: list[Converted] = []
    kw: dict[str, Converted] = {}
    caller: list[str] = []
    missing: list[OpArg] = []
    for a in schema.arguments:
        conv = given.get(a.name)
        if conv is None:
            missing.append(a)
            _check_missing(a, where, policy)
            if policy is DefaultPolicy.REQUIRE_CALLER:
                caller.append(a.name)
        elif not a.kwarg_only and len(pos) == schema.arguments.index(a):
            pos.append(conv)
        else:
            kw[a.name] = conv
    _check_outputs(schema.returns, node, where)
    checks = node_checks(target, node, where, ctx.exec_policy.max_memory)
    fn = getattr(target.fn, "_op", target.fn)
    seeded = is_seeded(target.fn)
    # an op allowed by name may change modes or print; an out= variant warns when it resizes its `out` (torch.ops
    # prints that to fd 2); a library op is trusted (its own state changes are its own)
    writes_out = any(a.kwarg_only and (a.alias or "").endswith("!") for a in schema.arguments)
    guarded = seeded or writes_out or (schema.namespace in TORCH_NAMESPACES and schema.qualname not in allowlist())
    return NodePlan(
        where,
        target,
        node,
        fn,
        pos,
        kw,
        tuple(caller),
        schema.returns,
        policy,
        tuple(missing),
        None,
        checks,
        seeded,
        guarded,
    )


def _check_missing(a: OpArg, where: str, policy: DefaultPolicy) -> None:
    if policy is DefaultPolicy.REQUIRE_CALLER:
        return
    if not a.has_default:
        raise BindError(f"{where}: required argument {a.name!r} ({a.type}) is missing and has no default")
    if policy is DefaultPolicy.REQUIRE_SERIALIZED:
        raise BindError(
            f"{where}: argument {a.name!r} ({a.type}, schema default {a.default_str}) is missing; "
            "policy REQUIRE_SERIALIZED needs every argument in the file; re-serialize it with the argument "
            "or choose FROM_SCHEMA"
        )


def _check_outputs(returns: tuple[OpArg, ...], node: m.Node, where: str) -> None:
    if len(node.outputs) != len(returns):
        raise BindError(
            f"{where}: the file has {len(node.outputs)} outputs but the schema returns {len(returns)} values"
        )
    for i, (r, out) in enumerate(zip(returns, node.outputs, strict=True)):
        allowed = return_members(r.parsed)
        if out.type not in allowed:
            raise BindError(
                f"{where}: output {i} of type {r.type} cannot be carried by {out.type}; "
                f"expected {' or '.join(sorted(allowed)) or 'nothing (no member carries this type)'}"
            )


def _bind_other(target: Target, node: m.Node, where: str, policy: DefaultPolicy, ctx: BindContext) -> NodePlan:
    """Fixed-table callables bind by parameter name; higher-order ops by their rule."""
    pos: list[Converted] = []
    kw: dict[str, Converted] = {}
    fn = target.fn
    if target.kind == "fixed":
        check_sym_operands(target, node, where)
        if not target.spelled.endswith("getitem"):
            fn = checked_sym_result(fn, node, where)
        by_name: dict[str, Converted] = {}
        for na in node.inputs:
            if na.name not in target.params:
                raise BindError(f"{where}: unknown argument {na.name!r}; expected {', '.join(target.params)}")
            if na.name in by_name:
                raise BindError(f"{where}: argument {na.name!r} is given twice; a call binds each argument once")
            if na.arg.type in _FIXED_REFUSED:
                raise BindError(f"{where}: argument {na.name!r} cannot be {na.arg.type}")
            by_name[na.name] = convert(na.arg, f"{where} argument {na.name!r}", ctx)
        for p in target.params:
            if p not in by_name:
                raise BindError(f"{where}: required argument {p!r} is missing")
            pos.append(by_name[p])
    else:
        rule = target.hop
        assert rule is not None
        positional = [na for na in node.inputs if not na.name]
        keywords = [na for na in node.inputs if na.name]
        n = len(rule.positional)
        if len(positional) < n or (len(positional) > n and not rule.varargs):
            raise BindError(
                f"{where}: takes {n}{' or more' if rule.varargs else ''} positional inputs "
                f"({', '.join(rule.positional)}), got {len(positional)}"
            )
        pos = [convert(na.arg, f"{where} input {i}", ctx) for i, na in enumerate(positional)]
        allowed = _hop_keywords(rule.keywords, positional, where)
        for na in keywords:
            if allowed is not None and na.name not in allowed:
                raise BindError(f"{where}: unknown keyword input {na.name!r}; expected {', '.join(sorted(allowed))}")
            if na.name in kw:
                raise BindError(f"{where}: keyword input {na.name!r} is given twice")
            kw[na.name] = convert(na.arg, f"{where} input {na.name!r}", ctx)
    body_at = _LOOP_BODY.get(target.spelled)
    if body_at is not None:  # while_loop iterations, map rows and scan steps share the run's loop budget
        fn = while_loop_with_budget(fn, ctx.exec_policy.max_while_iterations, where, body_at)
    return NodePlan(where, target, node, fn, pos, kw, (), (), policy, seeded=target.kind == "hop")


_LOOP_BODY = {
    "torch.ops.higher_order.while_loop": 1,
    "torch.ops.higher_order.map_impl": 0,
    "torch.ops.higher_order.scan": 0,
}
"""Looping higher-order ops -> the position of the subgraph they run once per iteration."""


def _hop_keywords(kind: str, positional: list[m.NamedArgument], where: str) -> set[str] | None:
    if kind == "any":
        return None
    if kind == "none":
        return set()
    op_arg = positional[0].arg
    if op_arg.type != "as_operator":
        raise BindError(f"{where}: input 0 must be as_operator (the mutated op), got {op_arg.type}")
    schema = resolve(op_arg.value).schema
    assert schema is not None
    return {a.name for a in schema.arguments}
