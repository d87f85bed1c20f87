"""Checks a bound node carries into its run: argument values, preconditions, output memory, symbolic operand types.

`bind_node` asks `node_checks` once per node; the plan runs the resulting `Checks` before its kernel
(nodes with no checks keep the fast path). What is checked:

- constant argument values refused whatever the op (`preconditions.refused_value`: `unsafe=True`);
- the op's precondition, when its kernel trusts index/offset/companion arguments (its family's check, `preconditions`);
- execution memory: before an allocation-heavy node (a factory, or an op with a size-like argument)
  runs, its outputs are computed on the `meta` device (shapes only, nothing allocated) and their bytes
  checked against `max_memory`;
- a check that itself raises (arguments it did not foresee) refuses the call with a KernelError naming the node
  and the check (`Checks.before`), so no check lets a foreign exception out; the kernel's own errors are wrapped
  where it is called (`plan`);
- fixed-table symbolic ops: operands are int, float, bool or SymInt, and the result matches the
  output member (`as_sym_int` an int, `as_sym_float` a float, `as_sym_bool` a bool).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from opwire.errors import BindError, BudgetError, KernelError, OpwireError, describe_exception
from opwire.proxy_executor.estimate import output_bytes, shape_key, shape_kinds
from opwire.proxy_executor.preconditions import Precondition, precondition_for, refused_value
from opwire.proxy_executor.size_rules import SIZE_RULES, SizeRule
from opwire.proxy_executor.targets import Target
from opwire.proxy_executor.verdicts import Verdicts
from opwire.schema import models as m

__all__ = ["SIZE_ARGS", "Checks", "check_sym_operands", "node_checks"]

SIZE_ARGS = frozenset(
    {
        "size", "sizes", "repeats", "output_size", "pad", "padding", "num_classes", "minlength", "bins", "end",
        "steps", "length", "n", "m", "scale_factors", "scales_h", "scales_w", "scales_d", "new_size", "shape",
        "window_length", "N", "output_padding", "dilation", "stride", "kernel_size", "lengths", "split_size",
        "s", "input_sizes", "last_dim_size", "num_samples", "row", "col",
    }
)  # fmt: skip
"""Argument names whose value sets how much an op allocates: a node with one runs the memory check."""

_SEEN = 16  # argument shapes whose estimate a plan keeps

_SYM_OPERANDS = frozenset({"as_int", "as_float", "as_bool", "as_sym_int", "as_sym_float", "as_sym_bool"})
_SYM_RESULTS = {"as_sym_int": (int,), "as_sym_float": (float, int), "as_sym_bool": (bool,)}


@dataclass
class Checks:
    """What a plan checks before its kernel: a precondition and/or the memory estimate (None: nothing)."""

    where: str
    precondition: Precondition | None
    memory: int | None
    """The byte budget of one node's outputs when the node is allocation-heavy, else None."""
    device_arg: bool = False
    """The op takes a `device` argument (a factory): the estimate passes device=meta."""
    size_rule: SizeRule | None = None
    """Output bytes of an op with no meta kernel (data-dependent shapes), from its arguments (a str: refused)."""
    light: bool = False
    """Every tensor-returning op is estimated, but a light one (pointwise, or one tensor in and not a grower)
    only when its inputs differ in shape or one is expanded (a zero stride): the case where outputs outgrow them."""
    tensor_args: tuple[tuple[int, str], ...] = ()
    """(position, name) of the op's Tensor arguments: what the light filter reads."""
    seen: dict[Any, int | None] | None = None
    """Output bytes by argument shapes, the last `_SEEN` estimated: a plan run again on shapes it saw (a plan
    serves every node of its op, so a model's layers take turns) is not re-run on meta."""
    arg_names: tuple[tuple[int, str], ...] = ()
    """(position, name) of every schema argument: what the estimate's cache key reads."""
    small: Callable[[list[Any], dict[str, Any]], bool] | None = None
    """A light op's cheapest filter (bind time, `_numel_bound`): its tensor inputs' element counts multiplied
    bound its outputs' elements (broadcast, or one tensor in); under the budget at 16 bytes an element, nothing to
    estimate. Checked before the shape filter, which stays for large tensors."""
    enough: Callable[[list[Any], dict[str, Any]], bool] | None = None
    """`small` when it is the whole story up to the estimate (no precondition): a caller's fast path calls it
    first and `before` only when it says no, saving a call per node."""
    verdicts: Verdicts | None = None  # the layouts the precondition passed on, if it reads no data (`verdicts`)
    arg_kinds: tuple[tuple[int, str, int], ...] = ()  # (position, name, kind) of every argument: the shape key's

    def __post_init__(self) -> None:
        if self.precondition is None and self.memory is not None:
            self.enough = self.small
        self.verdicts = self.verdicts or (Verdicts(self.arg_names) if self.precondition is not None else None)

    def before(self, fn: Callable[..., Any], pos: list[Any], kw: dict[str, Any]) -> None:
        """Raise before the kernel runs when a check fails (a check that itself raises refuses the call)."""
        check = "precondition"
        try:
            key: Any = None
            if self.precondition is not None and self.verdicts is not None:
                key = self.verdicts.key(pos, kw)  # the layout: every argument's geometry, dtype, device or value
                wrong = self.verdicts.check(self.precondition, pos, kw, key)
                if wrong is not None:
                    raise KernelError(f"{self.where}: refused before the kernel ran: {wrong}")
            if self.memory is not None:
                check = "memory estimate"
                self._estimate(fn, pos, kw, key)
        except OpwireError:
            raise
        except Exception as exc:  # a check's own failure on arguments it did not foresee: never a foreign error
            raise KernelError(
                f"{self.where}: refused before the kernel ran: its {check} could not read the arguments "
                f"({describe_exception(exc)})"
            ) from exc

    def estimate_ahead(self, fn: Callable[..., Any], pos: list[Any], kw: dict[str, Any]) -> None:
        """Run the memory estimate for arguments of these shapes before the call does, keeping what it finds for the
        call (`seen`): a replay's set-up passes meta tensors of the recorded layouts, and the key reads shapes,
        dtypes and layouts, never data or devices. Nothing is raised here: a call with these shapes raises what the
        estimate found when it runs. A node with a precondition (its key reads devices) is left to its call."""
        if self.memory is None or self.precondition is not None:
            return
        try:
            self._estimate(fn, pos, kw, None)
        except Exception:  # kept for the call, which raises it (or estimates again and raises then)
            return

    def _estimate(self, fn: Callable[..., Any], pos: list[Any], kw: dict[str, Any], key: Any) -> None:
        """Raise BudgetError when the node's outputs would go over the budget (`memory` is set)."""
        assert self.memory is not None
        if self.small is not None and self.small(pos, kw):
            return  # every output element at 16 bytes fits the budget: nothing can go over it
        if self.light and _same_size_out(self.tensor_args, pos, kw):
            return  # one shape in, nothing expanded: the outputs are no larger than the inputs
        key = key if key is not None else _hashable(shape_key(self.arg_kinds, pos, kw))
        need: int | str | None
        seen = self.seen if self.seen is not None else {}
        if key is not None and key in seen:
            need = seen[key]
        else:
            need = output_bytes(fn, pos, kw, self.device_arg)
            if need is None and self.size_rule is not None:
                need = self.size_rule(pos, kw)  # a size rule reads the data: run again on every call
            elif key is not None:  # by shapes
                if len(seen) >= _SEEN:
                    del seen[next(iter(seen))]  # the oldest
                seen[key] = need
                self.seen = seen
        if isinstance(need, str):
            raise KernelError(f"{self.where}: refused before the kernel ran: {need}")
        if need is not None and need > self.memory:
            raise BudgetError(
                f"{self.where}: the node's outputs would take {need:,} bytes, over the execution-memory "
                f"budget of {self.memory:,} bytes (checked before the kernel ran); raise it with "
                "max_memory=BYTES (ProxyExecutor, run_program, ProgramRunner)",
                "max_memory",
            )


def _hashable(key: list[Any]) -> tuple[Any, ...] | None:
    """`key` as a tuple, None when a value in it is unhashable (that call is estimated every time)."""
    out = tuple(key)
    try:
        hash(out)
    except TypeError:
        return None
    return out


@cache
def _tensor_type() -> Any:
    from torch import Tensor

    return Tensor


@cache
def _strided() -> Any:
    from torch import strided

    return strided


def node_checks(target: Target, node: m.Node, where: str, max_memory: int) -> Checks | None:
    """The checks of a node calling op `target` (bind time: refused constant values raise here)."""
    schema = target.schema
    assert schema is not None
    for na in node.inputs:
        if na.arg.type in ("as_bool", "as_int", "as_float"):
            why = refused_value(na.name, na.arg.value)
            if why is not None:
                raise BindError(f"{where}: argument {na.name!r}: {why}")
    pre = precondition_for(schema.qualname, [a.name for a in schema.arguments if not a.kwarg_only])
    tensors_in = any("Tensor" in a.type for a in schema.arguments)
    heavy = not tensors_in or any(a.name in SIZE_ARGS for a in schema.arguments)
    writes_out = any(a.kwarg_only and (a.alias or "").endswith("!") for a in schema.arguments)  # out=: resized
    may_copy = _composite(schema.qualname)  # reshape, contiguous, to: an alias when they can, else a copy
    owns = [
        r
        for r in schema.returns
        if "Tensor" in r.type and (writes_out or r.alias is None or (may_copy and not r.alias.endswith("!")))
    ]  # a view (view, permute, expand) allocates nothing: its copy is estimated where it happens
    light = False
    if not owns:
        heavy = False
    elif not heavy and tensors_in:
        typed = [a for a in schema.arguments if "Tensor" in a.type]
        one_in = len(typed) == 1 and "[]" not in typed[0].type
        grows = schema.name.partition("::")[2] in _GROWERS or schema.qualname in SIZE_RULES
        light = not grows and (one_in or _pointwise(target))
        heavy = True
    if pre is None and not heavy:
        return None
    device_arg = any(a.name == "device" for a in schema.arguments)
    if heavy and not tensors_in and not device_arg:
        heavy = False  # no way to place it on meta: nothing to estimate without running it
    tensor_args = tuple((i, a.name) for i, a in enumerate(schema.arguments) if a.type in ("Tensor", "Tensor?"))
    rule = SIZE_RULES.get(schema.qualname)
    small = None
    if (
        (light or schema.qualname in _BOUNDED)
        and heavy
        and all(a.type in ("Tensor", "Tensor?") for a in schema.arguments if "Tensor" in a.type)
    ):
        inputs = tuple(
            (i, a.name)
            for i, a in enumerate(schema.arguments)
            if a.type in ("Tensor", "Tensor?") and not (a.kwarg_only and (a.alias or "").endswith("!"))
        )  # an out= tensor is resized: its size bounds nothing
        small = _numel_bound(inputs, max_memory // (_MAX_ELEMENT * len(owns)))
    names = tuple(enumerate(a.name for a in schema.arguments))
    kinds = shape_kinds(schema.arguments)
    memory = max_memory if heavy else None
    return Checks(where, pre, memory, device_arg, rule, light, tensor_args, None, names, small, arg_kinds=kinds)


_BOUNDED = frozenset(
    {
        "aten::linear", "aten::mm", "aten::bmm", "aten::matmul", "aten::addmm", "aten::baddbmm",
        "aten::layer_norm", "aten::native_layer_norm", "aten::scaled_dot_product_attention",
        "aten::reshape", "aten::unflatten.int", "aten::_unsafe_view", "aten::view_copy",
    }
)  # fmt: skip
"""Reviewed: ops that are not light but whose outputs, for every argument value, have at most as many elements
as their tensor inputs' element counts multiplied (products: linear, mm, bmm, matmul (broadcast batch dims),
addmm, baddbmm, attention's [L, Ev] from query [L, E] and value [S, Ev]; the input's own count: the norms, and
reshapes whose sizes must keep it, else torch raises before allocating). So `_numel_bound` filters them too.
(Not every tensor-only op qualifies: lu_unpack makes an m x m P from an m x 1 LU and 1 pivot.)"""

_MAX_ELEMENT = 16
"""The widest element torch has (complex128), in bytes."""


def _numel_bound(inputs: tuple[tuple[int, str], ...], limit: int) -> Callable[[list[Any], dict[str, Any]], bool]:
    """Whether the product of the tensor `inputs`' element counts is at most `limit` (one, two positional: quicker).

    A light op's outputs have at most that many elements: one tensor in, out no more than in (what made it light);
    pointwise, the broadcast shape's elements are at most the product (each output dim is some input's). A number
    or None in a tensor's place counts 1, and so does an empty tensor (a bound, not the count)."""
    tensor = _tensor_type()
    if len(inputs) == 1:
        ((i, name),) = inputs

        def one(pos: list[Any], kw: dict[str, Any]) -> bool:
            v = pos[i] if i < len(pos) else kw.get(name)
            return not isinstance(v, tensor) or v.numel() <= limit

        return one

    def many(pos: list[Any], kw: dict[str, Any]) -> bool:
        total, n = 1, len(pos)
        for k, name in inputs:
            v = pos[k] if k < n else kw.get(name)
            if isinstance(v, tensor):
                total *= v.numel() or 1
        return total <= limit

    if len(inputs) == 2 and inputs[0][0] == 0 and inputs[1][0] == 1:  # aten.add, mul, where...: both positional

        def two(pos: list[Any], kw: dict[str, Any]) -> bool:
            try:  # tensors, the common call; anything else (a number, None, fewer positions) is counted by `many`
                total: int = (pos[0].numel() or 1) * (pos[1].numel() or 1)
            except (IndexError, AttributeError, TypeError):
                return many(pos, kw)
            return total <= limit

        return two
    return many


_GROWERS = frozenset({"diag", "diag_embed", "diagflat", "combinations", "tile", "bincount", "nonzero", "argwhere",
                      "repeat_interleave", "kron", "cartesian_prod", "outer", "ger", "block_diag"})  # fmt: skip
"""One-tensor ops whose output can outgrow their input (N -> N*N, or a size the data decides)."""


def _composite(qualname: str) -> bool:
    import torch

    try:
        return bool(torch._C._dispatch_has_kernel_for_dispatch_key(qualname, "CompositeImplicitAutograd"))
    except RuntimeError:  # a TorchScript builtin (aten::manual_seed): no dispatcher entry, no decomposition
        return False


def _pointwise(target: Target) -> bool:
    import torch

    return torch.Tag.pointwise in getattr(target.fn, "tags", ())


def _same_size_out(tensor_args: tuple[tuple[int, str], ...], pos: list[Any], kw: dict[str, Any]) -> bool:
    """The tensor arguments have one shape and are contiguous (nothing expanded, nothing broadcast)."""
    shape, tensor = None, _tensor_type()
    for i, name in tensor_args:
        v = pos[i] if i < len(pos) else kw.get(name)
        if not isinstance(v, tensor):
            continue  # None, or a number the converter kept for a 0-dim tensor
        if v.layout is not _strided() or not v.is_contiguous():  # sparse: no strides, estimated as the dense bound
            return False  # expanded (a zero stride) or strided: estimated, once per shape
        if shape is None:
            shape = v.shape
        elif v.shape != shape:
            return False
    return True


def check_sym_operands(target: Target, node: m.Node, where: str) -> None:
    """Bind time: a fixed-table symbolic op takes int, float, bool or SymInt operands and gives its member's type."""
    if target.spelled.endswith("getitem"):
        return
    for na in node.inputs:
        if na.arg.type not in _SYM_OPERANDS:
            raise BindError(
                f"{where}: argument {na.name!r} is {na.arg.type}; symbolic arithmetic takes int, float, bool "
                "or SymInt operands (as_int, as_float, as_bool, as_sym_int, as_sym_float, as_sym_bool)"
            )
    for i, out in enumerate(node.outputs):
        if out.type not in _SYM_RESULTS:
            raise BindError(
                f"{where}: output {i} is {out.type}; a symbolic op's result is as_sym_int, as_sym_float or as_sym_bool"
            )


def checked_sym_result(fn: Callable[..., Any], node: m.Node, where: str) -> Callable[..., Any]:
    """`fn` with its operands' runtime types and its result's type checked against the output member."""
    import torch

    want = _SYM_RESULTS.get(node.outputs[0].type, (int,)) if node.outputs else (int,)
    sym = (int, float, bool, torch.SymInt, torch.SymFloat, torch.SymBool)

    def run(*args: Any) -> Any:
        for a in args:
            if not isinstance(a, sym):
                raise KernelError(
                    f"{where}: symbolic arithmetic takes int, float, bool or SymInt operands, got {type(a).__name__}"
                )
        result = fn(*args)
        if isinstance(result, torch.SymInt | torch.SymFloat | torch.SymBool):
            return result
        if not isinstance(result, want):
            raise KernelError(
                f"{where}: the result is {type(result).__name__} {str(result)[:40]!r} but the output is "
                f"{node.outputs[0].type}"
            )
        return result

    return run
