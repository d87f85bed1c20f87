"""Which callables a serialized node may name: dispatcher ops through `torch.ops`, plus one fixed table.

The fixed table holds what exported graphs call that is no dispatcher op: `operator.getitem`, the
symbolic arithmetic torch's serializer writes (`_operator.add`, `torch.sym_max`, `math.trunc`, ... taken
from torch's own `_SYM_OPS`, each wrapped to keep integer results within a SymInt's i64 range:
`budgets.checked_sym_op`), and the higher-order ops with their binding rules. Nothing else is reachable.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from opwire.errors import UnknownTargetError
from opwire.proxy_executor.run_budgets import checked_sym_op
from opwire.schema.ops import OpSchema, op_schema
from opwire.serde.torch_serializer_tables import SYM_OPS  # torch's _SYM_OPS, as names (no torch._dynamo import)

__all__ = ["HOP_RULES", "HopRule", "Target", "fixed_table", "resolve", "split_target"]


@dataclass(frozen=True)
class HopRule:
    """Binding rule of a higher-order op: named leading positionals, then varargs and/or keywords."""

    positional: tuple[str, ...]
    varargs: bool = False
    keywords: str = "none"  # "none" | "op_schema" (names of the `_mutable_op` schema) | "any"
    subgraphs: tuple[str, ...] = ()


HOP_RULES: dict[str, HopRule] = {
    "cond": HopRule(("pred", "true_fn", "false_fn", "operands"), subgraphs=("true_fn", "false_fn")),
    "map_impl": HopRule(("f", "xs", "pos_args"), subgraphs=("f",)),
    "while_loop": HopRule(
        ("cond_fn", "body_fn", "carried_inputs", "additional_inputs"), subgraphs=("cond_fn", "body_fn")
    ),
    "scan": HopRule(("combine_fn", "init", "xs", "additional_inputs"), subgraphs=("combine_fn",)),
    "auto_functionalized": HopRule(("_mutable_op",), keywords="op_schema"),
    "auto_functionalized_v2": HopRule(("_mutable_op",), keywords="any"),
    "with_effects": HopRule(("token", "op"), varargs=True, keywords="any"),
    "invoke_subgraph": HopRule(("subgraph", "identifier"), varargs=True, subgraphs=("subgraph",)),
    "wrap_with_set_grad_enabled": HopRule(("enable_grad", "body"), varargs=True, subgraphs=("body",)),
    "wrap_with_autocast": HopRule(
        ("device_type", "dtype", "enabled", "cache_enabled", "body"), varargs=True, subgraphs=("body",)
    ),
}
"""Higher-order ops a file may call (as `torch.ops.higher_order.<name>`), with their binding rules."""


@dataclass(frozen=True)
class Target:
    """A resolved target: the callable, and its schema (ops), parameter names (fixed) or HOP rule."""

    spelled: str
    kind: str  # "op" | "fixed" | "hop"
    fn: Callable[..., Any]
    schema: OpSchema | None = None
    params: tuple[str, ...] = ()
    hop: HopRule | None = None

    @property
    def label(self) -> str:
        """The name errors use: "ns::op.overload" for ops, the spelled target otherwise."""
        return self.schema.qualname if self.schema is not None else self.spelled


@functools.cache
def fixed_table() -> dict[str, Callable[..., Any]]:
    """Serialized spelling -> callable for the non-dispatcher targets of exported graphs."""
    table: dict[str, Callable[..., Any]] = {}
    for module, name in SYM_OPS:
        fn = getattr(importlib.import_module(module), name, None)
        if fn is None:  # an older torch without this function: the graph naming it is refused as unknown
            continue
        table[f"{module}.{name}"] = checked_sym_op(fn)
        if module == "_operator":
            table[f"operator.{name}"] = table[f"_operator.{name}"]
    table["_operator.getitem"] = table["operator.getitem"] = operator.getitem
    return table


def split_target(target: str) -> tuple[str, str, str] | None:
    """(namespace, op, overload) of "ns::op[.overload]" or "torch.ops.ns.op.overload", else None."""
    if "::" in target:
        ns, _, rest = target.partition("::")
        op, _, overload = rest.partition(".")
        return (ns, op, overload or "default") if ns and op and "." not in overload else None
    if target.startswith("torch.ops."):
        parts = target.split(".")
        if len(parts) == 5:
            return parts[2], parts[3], parts[4]
    return None


def _params(fn: Callable[..., Any]) -> tuple[str, ...]:
    try:
        return tuple(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return ()


def resolve(target: str) -> Target:
    """The Target a serialized node names; anything else is an UnknownTargetError."""
    import torch

    if not isinstance(target, str) or not target:
        raise UnknownTargetError(f"expected a target name, got {target!r}")
    fixed = fixed_table().get(target)
    if fixed is not None:
        return Target(target, "fixed", fixed, params=_params(fixed))
    if target.startswith("torch.ops.higher_order."):
        name = target.removeprefix("torch.ops.higher_order.")
        rule = HOP_RULES.get(name)
        if rule is None:
            raise UnknownTargetError(
                f"target {target!r} is a higher-order op opwire does not run; "
                f"expected one of {', '.join('torch.ops.higher_order.' + n for n in HOP_RULES)}"
            )
        return Target(target, "hop", getattr(torch.ops.higher_order, name), hop=rule)
    parts = split_target(target)
    if parts is None:
        raise UnknownTargetError(
            f"target {target!r} is neither an operator ('ns::op.overload' or 'torch.ops.ns.op.overload') nor in "
            f"opwire's fixed table (operator.getitem, symbolic arithmetic, higher-order ops); "
            "a file cannot name any other callable"
        )
    ns, op, overload = parts
    try:
        overload_obj = getattr(getattr(getattr(torch.ops, ns), op), overload)
    except (AttributeError, RuntimeError):
        raise UnknownTargetError(
            f"target {target!r}: no operator {ns}::{op}.{overload} is registered; load the library that defines "
            f"namespace {ns!r} first (import its Python package or torch.ops.load_library('lib{ns}.so'))"
        ) from None
    return Target(target, "op", overload_obj, schema=op_schema(overload_obj))
