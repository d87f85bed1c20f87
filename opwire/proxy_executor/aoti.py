"""AOTInductor's flattened calling convention for one bound node (seed 003, oss_proxy_executor.cpp).

`int_args`: in schema order every int, SymInt and int-valued Scalar, and the elements of int/SymInt
lists (lengths from the file), then one entry per int return. `tensor_args`: every Tensor, non-None
`Tensor?` and the elements of tensor lists in schema order, then one slot per output tensor.
Everything else comes from the file. Counts, lengths and element types are checked before use.
"""

from __future__ import annotations

from collections.abc import Callable, MutableSequence, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from opwire.errors import BindError, KernelError
from opwire.proxy_executor.context import BindContext
from opwire.proxy_executor.convert import convert
from opwire.proxy_executor.default_policy import DefaultPolicy
from opwire.proxy_executor.fast_calls import flat
from opwire.proxy_executor.outputs import check_const
from opwire.proxy_executor.plan import NodePlan
from opwire.schema import models as m
from opwire.schema.members import ARGUMENT, Carrier
from opwire.schema.ops import OpArg, SchemaType

__all__ = ["FlatPlan", "build_flat"]

_INTISH = frozenset({"int", "SymInt", "Scalar", "Any"})


@dataclass(frozen=True)
class _Entry:
    name: str
    kind: str  # tensor | int | ints | tensors | opt_tensors | nested | static
    count: int = 1
    static: Any = None
    pattern: tuple[int, ...] = ()
    positional: bool = False


def _base(t: SchemaType) -> SchemaType:
    while t.kind == "optional":
        t = t.elem
    return t


def _input_entry(a: OpArg, arg: m.Argument, where: str) -> _Entry:
    base, member, v = _base(a.parsed), arg.type, arg.value
    elem = _base(base.elem).name if base.kind == "list" else ""
    c = ARGUMENT[member]  # what the member carries, from the IDL (schema/members.py)
    if c == _TENSOR and base.name in ("Tensor", "Any"):
        return _Entry(a.name, "tensor")
    if c == _OPT_TENSOR and v.as_tensor is not None:
        return _Entry(a.name, "tensor")
    if c in _INTLIKE and base.name in _INTISH:
        return _Entry(a.name, "int")
    if c.kind == "list" and c.elem in _INTLIKE and elem in _INTISH:
        return _Entry(a.name, "ints", len(v))
    if c == _LIST_TENSORS:
        return _Entry(a.name, "tensors", len(v))
    if c == _LIST_OPT_TENSORS:
        pattern = tuple(int(e.as_tensor is not None) for e in v)
        return _Entry(a.name, "opt_tensors", sum(pattern), pattern=pattern)
    if c == _NESTED_TENSORS:
        return _Entry(a.name, "nested", sum(len(x) for x in v), pattern=tuple(len(x) for x in v))
    conv = convert(arg, f"{where} argument {a.name!r}", BindContext())
    if conv.get is not None:
        raise BindError(
            f"{where}: argument {a.name!r} ({a.type}) is {member} naming a symbolic value, which the "
            "AOTInductor arrays cannot carry; use call() with the value by name"
        )
    return _Entry(a.name, "static", static=conv.const)


def _output_entry(r: OpArg, arg: m.Argument) -> _Entry:
    member, v = arg.type, arg.value
    c = ARGUMENT[member]
    if c == _TENSOR or (c == _OPT_TENSOR and v.as_tensor is not None):
        return _Entry(r.name, "tensor")
    if c == _LIST_TENSORS:
        return _Entry(r.name, "tensors", len(v))
    if _base(r.parsed).name in ("int", "SymInt") and c in _INTLIKE:
        return _Entry(r.name, "int")
    if c in (_NONE, _OPT_TENSOR):
        return _Entry(r.name, "static", static=None)
    symbolic = c.kind == "symbolic" or (c.kind == "list" and c.elem is not None and c.elem.kind == "symbolic")
    return _Entry(r.name, "unchecked" if symbolic else "const", static=arg)


# Carriers the flattened convention distinguishes (what a member holds, read off the IDL).
_TENSOR, _OPT_TENSOR, _NONE = Carrier("tensor"), Carrier("optional_tensor"), Carrier("none")
_INTLIKE = frozenset({Carrier("int"), Carrier("symbolic", Carrier("int"))})
_LIST_TENSORS = Carrier("list", _TENSOR)
_LIST_OPT_TENSORS = Carrier("list", _OPT_TENSOR)
_NESTED_TENSORS = Carrier("list", _LIST_TENSORS)


@dataclass(frozen=True)
class FlatPlan:
    """The flattened layout of one node: input entries, output entries, and the expected array sizes."""

    plan: NodePlan
    inputs: tuple[_Entry, ...]
    outputs: tuple[_Entry, ...]
    n_ints: tuple[int, int]
    n_tensors: tuple[int, int]

    def describe(self) -> str:
        """The expected arrays, e.g. "int_args: n, dims[2], <return 0>; tensor_args: x, bias, <out 0>"."""

        def side(kinds: tuple[str, ...], ret: tuple[str, ...]) -> str:
            ins = [f"{e.name}[{e.count}]" if e.kind != kinds[0] else e.name for e in self.inputs if e.kind in kinds]
            outs = [
                f"<out {e.name or i}>" + (f"[{e.count}]" if e.kind == "tensors" else "")
                for i, e in enumerate(self.outputs)
                if e.kind in ret
            ]
            return ", ".join(ins + outs) or "nothing"

        return (
            f"int_args ({sum(self.n_ints)}): {side(('int', 'ints'), ('int',))}; "
            f"tensor_args ({sum(self.n_tensors)}): "
            f"{side(('tensor', 'tensors', 'opt_tensors', 'nested'), ('tensor', 'tensors'))}"
        )

    def _check_sizes(self, int_args: Sequence[int], tensor_args: MutableSequence[Any]) -> None:
        where = self.plan.where
        if not hasattr(int_args, "__len__") or not hasattr(tensor_args, "__setitem__"):
            raise BindError(f"{where}: expected int_args as a sequence and tensor_args as a mutable list")
        if len(int_args) != sum(self.n_ints) or len(tensor_args) != sum(self.n_tensors):
            raise BindError(
                f"{where}: expected {sum(self.n_ints)} ints and {sum(self.n_tensors)} tensors "
                f"({self.describe()}), got {len(int_args)} ints and {len(tensor_args)} tensors"
            )

    @property
    def fast(self) -> Callable[[Sequence[int], MutableSequence[Any]], list[Any] | None] | None:
        """The precomputed call for the common shape (None when the node has none): None back means "general path"."""
        return self._fast

    @cached_property
    def _fast(self) -> Callable[[Sequence[int], MutableSequence[Any]], list[Any] | None] | None:
        return flat(self)

    def call(self, int_args: Sequence[int], tensor_args: MutableSequence[Any]) -> list[Any]:
        """Run the node on the flattened arrays; output slots of `tensor_args` receive the results."""
        import torch

        fast = self._fast
        if fast is not None and hasattr(int_args, "__len__") and hasattr(tensor_args, "__setitem__"):
            done = fast(int_args, tensor_args)
            if done is not None:
                return done
        self._check_sizes(int_args, tensor_args)
        where, ii, ti = self.plan.where, 0, 0

        def an_int(k: int) -> int:
            v = int_args[k]
            if isinstance(v, bool) or not isinstance(v, int):
                raise BindError(f"{where}: int_args[{k}] is {type(v).__name__} {v!r}, expected an int")
            return v

        def a_tensor(k: int) -> Any:
            v = tensor_args[k]
            if not isinstance(v, torch.Tensor):
                raise BindError(f"{where}: tensor_args[{k}] is {type(v).__name__}, expected a tensor")
            return v

        pos: list[Any] = []
        kw: dict[str, Any] = {}
        for e in self.inputs:
            if e.kind == "tensor":
                v, ti = a_tensor(ti), ti + 1
            elif e.kind == "int":
                v, ii = an_int(ii), ii + 1
            elif e.kind == "ints":
                v, ii = [an_int(k) for k in range(ii, ii + e.count)], ii + e.count
            elif e.kind == "tensors":
                v, ti = [a_tensor(k) for k in range(ti, ti + e.count)], ti + e.count
            elif e.kind == "opt_tensors":
                v = []
                for present in e.pattern:
                    v.append(a_tensor(ti) if present else None)
                    ti += present
            elif e.kind == "nested":
                v = []
                for n in e.pattern:
                    v.append([a_tensor(k) for k in range(ti, ti + n)])
                    ti += n
            else:
                v = e.static
            if e.positional:
                pos.append(v)
            else:
                kw[e.name] = v
        results = self.plan.results(self.plan.invoke(pos, kw))
        outs: list[Any] = []
        for i, (e, r) in enumerate(zip(self.outputs, results, strict=True)):
            label = f"{where} output {i}"
            if e.kind == "tensor":
                if not isinstance(r, torch.Tensor):
                    raise KernelError(f"{label}: expected a tensor, the kernel returned {type(r).__name__}")
                tensor_args[ti], ti = r, ti + 1
                outs.append(r)
            elif e.kind == "tensors":
                if not isinstance(r, (list, tuple)) or len(r) != e.count:
                    raise KernelError(f"{label}: the file names {e.count} tensors, the kernel returned {r!r:.60}")
                for t in r:
                    tensor_args[ti], ti = t, ti + 1
                    outs.append(t)
            elif e.kind == "int":
                check_const(an_int(ii), r, label)
                ii += 1
            elif e.kind == "const":
                check_const(convert(e.static, label, BindContext()).const, r, label)
        return outs


def build_flat(p: NodePlan) -> FlatPlan:
    """The flattened layout of a bound op node (AOTInductor runs dispatcher ops only)."""
    schema = p.target.schema
    if schema is None:
        raise BindError(f"{p.where}: call_function runs dispatcher ops only; use call() for this target")
    given = {na.name: na.arg for na in p.node.inputs}
    ins: list[_Entry] = []
    for i, a in enumerate(schema.arguments):
        arg = given.get(a.name)
        if arg is not None:
            e = _input_entry(a, arg, p.where)
        elif p.policy is DefaultPolicy.REQUIRE_CALLER:
            e = _caller_entry(a, p.where)
        else:
            continue  # FROM_SCHEMA: the dispatcher fills the default
        positional = not a.kwarg_only and len(ins) == i and all(x.positional for x in ins)
        ins.append(_Entry(e.name, e.kind, e.count, e.static, e.pattern, positional))
    outs = tuple(_output_entry(r, arg) for r, arg in zip(schema.returns, p.node.outputs, strict=True))

    def count(entries: tuple[_Entry, ...] | list[_Entry], kinds: tuple[str, ...]) -> int:
        return sum(e.count for e in entries if e.kind in kinds)

    n_ints = (count(ins, ("int", "ints")), count(outs, ("int",)))
    n_tensors = (count(ins, ("tensor", "tensors", "opt_tensors", "nested")), count(outs, ("tensor", "tensors")))
    return FlatPlan(p, tuple(ins), outs, n_ints, n_tensors)


def _caller_entry(a: OpArg, where: str) -> _Entry:
    base = _base(a.parsed)
    if base.name in ("int", "SymInt"):
        return _Entry(a.name, "int")
    if base.name == "Tensor":
        return _Entry(a.name, "tensor")
    raise BindError(
        f"{where}: argument {a.name!r} ({a.type}) is not in the file, and under policy REQUIRE_CALLER only "
        "int, SymInt and Tensor arguments can come from the AOTInductor arrays; serialize it in the file "
        "or choose FROM_SCHEMA"
    )
