"""Fast calls of bound plans, and the light guard that keeps a kernel's warnings off the host's stderr.

`prepare(p, view)` (named values, `NodePlan.prepared`) and `flat(fp)` (AOTInductor's arrays, `FlatPlan.fast`)
are precomputed calls for the common shape of a node: a graph runs the first, `ProxyExecutor.call` and
`call_function` run both. The executor runs allowlisted, unseeded torch ops and library ops without a `RunGuard`
(they change no grad mode, mode, flag or generator state, and a guard costs more than a small kernel), so their
op is a `Light` (`light(p)`): what the kernel says through `TORCH_WARN` is still collected, not printed by c10's
default handler on file descriptor 2 (`torch.ops` installs no handler):

- each call runs inside a torch binding, whose `PyWarningHandler` (thread-local, for the binding's duration)
  buffers the kernel's warnings and hands them to Python's `warnings` when the binding returns, issued from the
  frame that called the binding: always a frame of this module;
- one entry of `warnings.filters` matches warnings issued from this module and from nowhere else: it files
  their text for the thread that issued them and ignores them. No hook of `warnings` is swapped; another
  module's warnings, the host's own among them, pass the entry untouched on every thread;
- after each call, whatever this thread filed is re-issued as `OpwireWarning`s naming the node (`guard.reissue`,
  as a guarded run says them) at the host's frame, where the host's filters decide.

The binding: `torch._C._disabled_torch_function_impl(fn, (), args, kwargs)` (~0.2 us) for a torch op when no
argument has a `__torch_function__`, no torch function mode is active (`torch._C._has_torch_function`, ~0.02
us) and no dispatch mode is: it turns subclass handling off for the call, which then has no subclass to skip
and no Python code (torch's C++ kernels run) to see it. Otherwise (a subclass argument or a mode, whose
`__torch_function__` must run as it would; a dispatch mode or a library op, whose Python code keeps the
caller's torch-function state) `Tensor.apply_` on the guard's one-element carrier (~0.5 us), which changes no
state (a mode does not see the carrier's own call). The entry is kept first in
`warnings.filters` (put back in front when the host inserts filters before it: one identity test per call), so
a host's catch-all filter decides on the re-issued `OpwireWarning`, not on the kernel's raw text.
"""

from __future__ import annotations

import functools
import sys
import threading
import warnings
from collections.abc import Callable, Mapping, MutableSequence, Sequence
from dataclasses import replace
from operator import itemgetter
from typing import TYPE_CHECKING, Any, NoReturn

import torch

from opwire.errors import KernelError, OpwireError
from opwire.proxy_executor.exec_policy import TORCH_NAMESPACES
from opwire.proxy_executor.guard import SKIP_NEXT, CarriedCall, carrier, reissue
from opwire.proxy_executor.outputs import check_span, store_output

if TYPE_CHECKING:
    from opwire.proxy_executor.aoti import FlatPlan
    from opwire.proxy_executor.plan import NodePlan

__all__ = ["Light", "flat", "light", "prepare"]

_HERE = __name__
_GLOBALS = globals()
_PACKAGE = __name__.rpartition(".")[0] + "."
_MAX_FILED = 1024  # kept per thread until re-issued (past it only counted: a warning in a loop is bounded)
_LAST = threading.local()  # .text: the text of the warning the filters are looking at on this thread
_FILED: dict[int, list[str]] = {}  # thread -> the texts of its kernel warnings not yet re-issued
_DROPPED: dict[int, int] = {}  # thread -> how many more it had past _MAX_FILED
_HAS_FN = torch._C._has_torch_function
_NO_SUBCLASS: Callable[..., Any] = torch._C._disabled_torch_function_impl
_MODES = torch._C._len_torch_dispatch_stack  # a dispatch mode's Python code keeps the caller's torch-function state


class _Text:
    """The entry's message matcher: matches every text, noting it for this thread (the module matcher files it)."""

    __slots__ = ()

    def match(self, text: str) -> bool:
        """True; remembers `text`."""
        _LAST.text = text
        return True


class _FromHere:
    """The entry's module matcher: true for a warning issued from this module (a kernel's), which it files."""

    __slots__ = ()

    def match(self, module: str) -> bool:
        """Whether `module` is this one; if so the text just matched is filed for the calling thread."""
        if module != _HERE:
            return False
        # Python keeps a registry of shown warnings in the issuing module's globals, made on the first one. None may
        # stay here: when a kernel warns and then raises, torch hands its warnings over with the error pending, and
        # a registry would take Python into these matchers with it (SystemError in place of the kernel's error);
        # with none, the warning is dropped there and the kernel's own error stands.
        _GLOBALS.pop("__warningregistry__", None)
        _file(getattr(_LAST, "text", ""))
        return True


_ENTRY: Any = ("ignore", _Text(), Warning, _FromHere(), 0)  # matchers where typeshed says regexes


def _put_first() -> None:
    """Make the entry the first of `warnings.filters` (the host's filters keep their order behind it)."""
    filters: list[Any] = warnings.filters  # type: ignore[assignment]  # a list (typeshed says Sequence)
    filters[:] = [_ENTRY, *(f for f in filters if f is not _ENTRY)]
    mutated = getattr(warnings, "_filters_mutated", None)  # what filterwarnings calls: registries start over
    if mutated is not None:  # (a private name: a Python without it keeps its registries)
        mutated()


class Light:
    """An op whose every call runs inside a torch binding, its kernel warnings re-issued naming `where`."""

    __slots__ = ("fn", "torch_op", "where")

    def __init__(self, fn: Callable[..., Any], where: str, torch_op: bool) -> None:
        self.fn, self.where, self.torch_op = fn, where, torch_op

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """`fn(*args, **kwargs)`; what the kernel warned is re-issued as OpwireWarnings when it returns."""
        filters = warnings.filters
        if not filters or filters[0] is not _ENTRY:
            _put_first()
        try:
            plain = not _HAS_FN(args) and not (kwargs and _HAS_FN(tuple(kwargs.values()))) and not _MODES()
            if self.torch_op and plain:
                return _NO_SUBCLASS(self.fn, (), args, kwargs)
            return _carried(self.fn, args, kwargs)
        finally:
            if _FILED:  # also when the kernel raised: its warnings are said before its error
                _reissue(self.where)


def light(p: NodePlan) -> NodePlan:
    """`p` with its op made a `Light` (a torch op takes the cheap binding when it can)."""
    schema = p.target.schema
    torch_op = schema is not None and schema.namespace in TORCH_NAMESPACES
    return replace(p, fn=Light(p.fn, p.where, torch_op), fast=None)


def _carried(fn: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    """`fn(*args, **kwargs)` inside the carrier's `apply_`, called from this module (its warnings are filed)."""
    box = CarriedCall(functools.partial(fn, **kwargs) if kwargs else fn, tuple(args))
    if torch._C._is_torch_function_mode_enabled() and SKIP_NEXT is not None:
        SKIP_NEXT(True)  # the carrier's apply_ is no call a torch function mode should see
    try:
        carrier().apply_(box)
    except Warning as exc:  # a filter put before the entry by another thread just now made it an error
        if not box.done:
            raise
        _file(str(exc))
    return box.out


def _file(text: str) -> None:
    """Keep `text` for this thread's re-issue (one dict operation: atomic between threads)."""
    me = threading.get_ident()
    texts = _FILED.setdefault(me, [])
    if len(texts) < _MAX_FILED:
        texts.append(text)
    else:
        _DROPPED[me] = _DROPPED.get(me, 0) + 1


def _reissue(where: str) -> None:
    """Re-issue this thread's filed warnings (its work is done) at the first frame outside the executor."""
    me = threading.get_ident()
    texts, dropped = _FILED.pop(me, None), _DROPPED.pop(me, 0)
    if texts:
        frame, level = sys._getframe(1), 3  # warn's stacklevel 1 is reissue, 2 this function, 3 its caller
        while frame.f_back is not None and frame.f_globals.get("__name__", "").startswith(_PACKAGE):
            frame, level = frame.f_back, level + 1
        reissue(where, [(where, text) for text in texts], dropped, level)


def prepare(p: NodePlan, view: bool) -> Callable[[Mapping[str, Any]], dict[str, Any]] | None:
    """A fast call for the common shape (named or constant inputs, one tensor out, no caller defaults), or None.

    `view`: the output's span is checked against its storage (`plan._view_returns`)."""
    convs = [*p.pos, *p.kw.values()]
    outs = p.node.outputs
    if p.caller or p.target.kind != "op" or len(p.returns) != 1 or len(outs) != 1 or outs[0].as_tensor is None:
        return None
    if any(c.get is not None and c.name is None for c in convs):
        return None
    spec = tuple((c.name, c.const) for c in p.pos)
    kwspec = tuple((k, c.name, c.const) for k, c in p.kw.items())
    names = [n for n, _ in spec]
    # two or more named values and nothing else: one C call picks them (a comprehension costs a frame)
    pick = itemgetter(*names) if len(names) > 1 and None not in names and not kwspec else None
    out_name, fn, tensor = outs[0].as_tensor.name, p.fn, torch.Tensor
    lit = fn if isinstance(fn, Light) else None
    raw, torch_op, module, entry, filed = getattr(lit, "fn", fn), bool(lit and lit.torch_op), warnings, _ENTRY, _FILED

    def call(values: Mapping[str, Any]) -> dict[str, Any]:
        try:
            args = list(pick(values)) if pick is not None else [c if n is None else values[n] for n, c in spec]
            kwargs = {k: c if n is None else values[n] for k, n, c in kwspec} if kwspec else {}
        except KeyError:
            p.args(values.__getitem__, None)  # raises the BindError naming the missing value
            raise
        checks = p.checks
        if checks is not None and (checks.enough is None or not checks.enough(args, kwargs)):
            checks.before(fn, args, kwargs)
        try:
            if lit is None:
                r = fn(*args, **kwargs)
            else:  # Light.__call__, inline (a frame less)
                filters = module.filters
                if not filters or filters[0] is not entry:
                    _put_first()
                if torch_op and not _HAS_FN(args) and not (kwargs and _HAS_FN(tuple(kwargs.values()))) and not _MODES():
                    r = _NO_SUBCLASS(raw, (), args, kwargs)
                else:
                    r = _carried(raw, args, kwargs)
        except OpwireError:
            raise  # as `invoke`: a budget of the run or a check is not the kernel's failure
        except Exception as exc:
            raise p.kernel_error(exc) from exc
        finally:
            if filed:  # a light call's warnings (said before its error), or a Python kernel's warning from here
                _reissue(p.where)
        if not isinstance(r, tensor):
            store_output(outs[0], r, f"{p.where} output 0", {})
        elif view:
            check_span(r, f"{p.where} output 0")  # every view's span lies inside its storage
        return {out_name: r}

    return call


def flat(fp: FlatPlan) -> Callable[[Sequence[int], MutableSequence[Any]], list[Any] | None] | None:
    """A fast `call_function` for the common shape (tensor/int/constant inputs, one tensor out), or None.

    It returns None (and the general path then runs and reports) whenever an array has the wrong
    length or an entry the wrong type, so every check of the general path still applies.
    """
    if fp.plan.target.kind != "op" or [e.kind for e in fp.outputs] != ["tensor"]:
        return None
    if any(e.kind not in ("tensor", "int", "ints", "static") for e in fp.inputs):
        return None
    n_ints, n_tensors = sum(fp.n_ints), sum(fp.n_tensors)
    ii = ti = 0
    pos: list[tuple[int, Any, int]] = []  # (0 tensor | 1 int | 2 int list | 3 constant, index or value, end)
    kw: list[tuple[str, int, Any, int]] = []
    for e in fp.inputs:
        if e.kind == "tensor":
            src, x, end, ti = 0, ti, 0, ti + 1
        elif e.kind == "int":
            src, x, end, ii = 1, ii, 0, ii + 1
        elif e.kind == "ints":
            src, x, end, ii = 2, ii, ii + e.count, ii + e.count
        else:
            src, x, end = 3, e.static, 0
        if e.positional:
            pos.append((src, x, end))
        else:
            kw.append((e.name, src, x, end))
    out_slot, fn, tensor, plan = ti, fp.plan.fn, torch.Tensor, fp.plan
    checks = plan.checks  # a precondition or the memory estimate, run before the kernel as on the general path
    tensors_in = tuple(range(ti))  # every int slot is an input (the one output is a tensor)
    lit = fn if isinstance(fn, Light) else None
    raw, torch_op, module, entry, filed = getattr(lit, "fn", fn), bool(lit and lit.torch_op), warnings, _ENTRY, _FILED

    def finish(args: list[Any], kwargs: dict[str, Any], tensor_args: MutableSequence[Any]) -> list[Any]:
        if checks is not None and (checks.enough is None or not checks.enough(args, kwargs)):
            checks.before(fn, args, kwargs)
        try:
            if lit is None:
                r = fn(*args, **kwargs)
            else:  # Light.__call__, inline (a frame less)
                filters = module.filters
                if not filters or filters[0] is not entry:
                    _put_first()
                if torch_op and not _HAS_FN(args) and not (kwargs and _HAS_FN(tuple(kwargs.values()))) and not _MODES():
                    r = _NO_SUBCLASS(raw, (), args, kwargs)
                else:
                    r = _carried(raw, args, kwargs)
        except Exception as exc:
            raise plan.kernel_error(exc) from exc
        finally:
            if filed:
                _reissue(plan.where)
        if not isinstance(r, tensor):
            _not_a_tensor(plan.where, r)
        tensor_args[out_slot] = r
        return [r]

    if not kw and all(src == 0 for src, _, _ in pos):  # tensors only, all positional: aten.add, mm, relu...
        idx = tuple(x for _, x, _ in pos)
        take = itemgetter(*idx) if len(idx) > 1 else lambda slots: (slots[idx[0]],)  # as `pick` above

        def tensors_only(int_args: Sequence[int], tensor_args: MutableSequence[Any]) -> list[Any] | None:
            if len(int_args) != n_ints or len(tensor_args) != n_tensors:
                return None
            args = list(take(tensor_args))
            for v in args:
                if not isinstance(v, tensor):
                    return None
            return finish(args, {}, tensor_args)

        return tensors_only

    def call(int_args: Sequence[int], tensor_args: MutableSequence[Any]) -> list[Any] | None:
        if len(int_args) != n_ints or len(tensor_args) != n_tensors:
            return None
        for v in int_args:  # every entry is an input int (or an element of an int list): checked once here
            if type(v) is not int:
                return None
        for i in tensors_in:
            if not isinstance(tensor_args[i], tensor):
                return None
        args = [
            tensor_args[x] if src == 0 else int_args[x] if src == 1 else list(int_args[x:end]) if src == 2 else x
            for src, x, end in pos
        ]
        kwargs = (
            {
                k: tensor_args[x] if src == 0 else int_args[x] if src == 1 else list(int_args[x:end]) if src == 2 else x
                for k, src, x, end in kw
            }
            if kw
            else {}
        )
        return finish(args, kwargs, tensor_args)

    return call


def _not_a_tensor(where: str, r: Any) -> NoReturn:
    raise KernelError(f"{where} output 0: expected a tensor, the kernel returned {type(r).__name__}")
