"""What a run may not leave behind: every executor entry point runs its work inside a `RunGuard`.

(The executor's calls of allowlisted, unseeded torch ops and of library ops, which change none of what a guard
puts back, run under the light guard of `fast_calls` instead: their kernel warnings are collected all the same.)

On exit the guard puts back what it found: grad mode, the deterministic-algorithms flags, the torch
dispatch and function mode stacks (modes a run pushed are popped), and, when the work can draw random
numbers, the CPU generator's state (and every initialized CUDA device's). Kernel warnings (torch's
`TORCH_WARN`, e.g. `add.out` resizing a wrong-shaped `out`) never reach the host's stderr directly:
they are collected while the work runs and re-issued once, as `OpwireWarning`s naming the node they came
from, so the host's warning filters decide what happens to them.

Work runs through `RunGuard.call(where, fn, ...)` (a graph's nodes through `run_nodes`, one loop), under
torch's own Python warning handler: ops called
through `torch.ops` do not install it (their `TORCH_WARN` goes to c10's default handler, which prints
`[W...] Warning:` lines on file descriptor 2), but every torch binding does, for its duration, on its thread.
`call` enters one (`Tensor.apply_` on a one-element carrier, which calls `fn` back from C++), so a kernel's
warnings are handed to Python's `warnings` when the call returns, labelled `where`. The guard collects
them by swapping the `warnings` module's display hook for the duration of the run (another thread's
warning in that window goes where it would have gone). Nothing in the process is redirected: the host's
stderr, and any other thread's torch warnings, are untouched. Warnings a kernel emits from its own worker
threads (inside a parallel region) are not the caller's: torch prints them as it always does.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import torch
from torch.utils._python_dispatch import _pop_mode

from opwire.errors import OpwireWarning

__all__ = ["SKIP_NEXT", "CarriedCall", "RunGuard", "active_guard", "carrier", "reissue"]

_MAX_WARNINGS = 8  # re-issued per run; the rest are counted in the last one
_MAX_TEXT = 300
_MAX_KEPT = 1024  # warnings kept per run (past it only the count grows): a warning in a loop is bounded
_HERE = globals()
SKIP_NEXT: Callable[[bool], None] | None = getattr(torch._C, "_set_skip_next_torch_function", None)
"""Hides the next torch call from the active torch function modes (None on a torch without it)."""
_T = TypeVar("_T")


class RunGuard:
    """Context manager restoring RNG (when `rng`), grad mode, modes and flags; collects kernel warnings."""

    __slots__ = (
        "_det",
        "_fn_modes",
        "_grad",
        "_modes",
        "_outer",
        "_rng",
        "_shown",
        "_thread",
        "at",
        "dropped",
        "rng",
        "warned",
        "where",
    )

    def __init__(self, where: str, rng: bool = True) -> None:
        self.where = where
        self.at = where  # the node running now (`call`): what a warning arriving now is labelled
        self.rng = rng
        self.warned: list[tuple[str, str]] = []  # (where, text)
        self.dropped = 0

    def __enter__(self) -> RunGuard:
        self._grad = torch.is_grad_enabled()
        self._det = (
            torch.are_deterministic_algorithms_enabled(),
            torch.is_deterministic_algorithms_warn_only_enabled(),
        )
        self._modes = torch._C._len_torch_dispatch_stack()
        self._fn_modes = torch._C._len_torch_function_stack()
        self._rng = _rng_state() if self.rng else None
        self._thread = threading.get_ident()
        self._shown = getattr(warnings, "_showwarnmsg", None)
        warnings._showwarnmsg = self._collect  # type: ignore[attr-defined]
        self._outer = getattr(_ACTIVE, "guard", None)
        _ACTIVE.guard = self
        return self

    def call(self, where: str, fn: Callable[..., _T], *args: Any) -> _T:
        """`fn(*args)` under torch's Python warning handler; the kernel warnings it raises are labelled `where`."""
        box = CarriedCall(fn, args)
        outer, self.at = self.at, where
        try:
            if torch._C._is_torch_function_mode_enabled():
                if SKIP_NEXT is None:  # a torch without the flag: run as is (its warnings print as torch prints them)
                    return fn(*args)
                SKIP_NEXT(True)  # the carrier's apply_ is no call a torch function mode should see
            carrier().apply_(box)
        except Warning as exc:  # an "error" filter raised a kernel warning after the work returned
            if not box.done:
                raise
            self._keep(where, str(exc))
        finally:
            self.at = outer
            if "__warningregistry__" in _HERE:  # torch warns "from" this module: no warning is ever deduplicated
                del _HERE["__warningregistry__"]
        return box.out  # type: ignore[no-any-return]  # set: apply_ called box once (the carrier has one element)

    def run_nodes(self, wheres: Sequence[Any], runs: Sequence[Callable[[Any], Any]], env: dict[str, Any]) -> None:
        """`env.update(run(env))` for each node in order, as `call` runs one (labelled with its plan's `where`)."""
        holder, step, skip = carrier(), CarriedCall(None, ()), None
        if torch._C._is_torch_function_mode_enabled():
            if SKIP_NEXT is None:
                for run in runs:
                    env.update(run(env))
                return
            skip = SKIP_NEXT
        outer = self.at
        step.args = (env,)
        try:
            for p, run in zip(wheres, runs, strict=True):
                self.at = p.where
                step.fn, step.done = run, False
                if skip is not None:
                    skip(True)
                try:
                    holder.apply_(step)
                except Warning as exc:  # an "error" filter raised a kernel warning after the node returned
                    if not step.done:
                        raise
                    self._keep(p.where, str(exc))
                if "__warningregistry__" in _HERE:
                    del _HERE["__warningregistry__"]
                env.update(step.out)
        finally:
            self.at = outer

    def _collect(self, msg: Any) -> None:
        if threading.get_ident() != self._thread and self._shown is not None:
            self._shown(msg)  # another thread's warning: where it would have gone
            return
        if isinstance(msg.message, OpwireWarning):  # an inner guard's: already says where, passed on as it is
            self._keep("", str(msg.message))
        else:
            self._keep(self.at, str(msg.message))

    def _keep(self, where: str, text: str) -> None:
        if len(self.warned) < _MAX_KEPT:
            self.warned.append((where, text))
        else:
            self.dropped += 1

    def __exit__(self, *exc: object) -> None:
        _ACTIVE.guard = self._outer
        warnings._showwarnmsg = self._shown  # type: ignore[attr-defined]
        if torch.is_grad_enabled() != self._grad:
            torch._C._set_grad_enabled(self._grad)
        if (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()) != (
            self._det
        ):
            torch.use_deterministic_algorithms(self._det[0], warn_only=self._det[1])
        while torch._C._len_torch_dispatch_stack() > self._modes:
            _pop_mode()  # a mode the run pushed and left
        while torch._C._len_torch_function_stack() > self._fn_modes:
            torch._C._pop_torch_function_stack()
        if self._rng is not None:
            _set_rng_state(self._rng)
        if self.warned:
            self._reissue()

    def _reissue(self) -> None:
        reissue(self.where, self.warned, self.dropped, 4)  # 4: the frame holding the `with RunGuard(...)`
        self.warned = []
        self.dropped = 0


def reissue(where: str, warned: list[tuple[str, str]], dropped: int, stacklevel: int) -> None:
    """Each distinct (where, text) of `warned` as one OpwireWarning (with its count); past 8, the rest counted."""
    seen: dict[tuple[str, str], int] = {}
    for at, text in warned:
        one_line = " ".join(text.split())
        key = (at, one_line[:_MAX_TEXT] + ("..." if len(one_line) > _MAX_TEXT else ""))
        seen[key] = seen.get(key, 0) + 1
    more = len(seen) - _MAX_WARNINGS + dropped
    for i, ((at, text), n) in enumerate(seen.items()):
        if i == _MAX_WARNINGS:
            break
        times = f" ({n} times)" if n > 1 else ""
        said = f"{at}: the kernel warned{times}: {text}" if at else text + times
        warnings.warn(said, OpwireWarning, stacklevel=stacklevel)
    if more > 0:
        warnings.warn(f"{where}: {more} more kernel warnings", OpwireWarning, stacklevel=stacklevel)


class CarriedCall:
    """`fn(*args)` called back by `Tensor.apply_` (once: the carrier has one element)."""

    __slots__ = ("args", "done", "fn", "out")
    fn: Any
    args: tuple[Any, ...]
    done: bool
    out: Any

    def __init__(self, fn: Any, args: tuple[Any, ...]) -> None:
        self.fn, self.args, self.done, self.out = fn, args, False, None

    def __call__(self, _element: float) -> int:
        self.out = self.fn(*self.args)
        self.done = True
        return 0


_ACTIVE = threading.local()  # .guard: the innermost RunGuard of this thread
_CARRIERS = threading.local()  # .tensor: this thread's one-element CPU tensor (apply_ writes the 0 back)


def active_guard() -> RunGuard | None:
    """The innermost `RunGuard` active on this thread (None outside any)."""
    return getattr(_ACTIVE, "guard", None)


def carrier() -> torch.Tensor:
    """This thread's one-element CPU tensor whose `apply_(call)` runs `call` inside a torch binding."""
    tensor = getattr(_CARRIERS, "tensor", None)
    if tensor is None:  # made once per thread, unseen by the modes and contexts active now
        with torch._C.DisableTorchFunction(), torch._C._DisableTorchDispatch(), torch.inference_mode(False):
            tensor = _CARRIERS.tensor = torch.zeros(1, dtype=torch.float32, device="cpu")
    return tensor


def _rng_state() -> tuple[torch.Tensor, list[torch.Tensor] | None]:
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None  # type: ignore[no-untyped-call]
    return torch.default_generator.get_state(), cuda


def _set_rng_state(state: tuple[torch.Tensor, list[torch.Tensor] | None]) -> None:
    torch.default_generator.set_state(state[0])
    if state[1] is not None:
        torch.cuda.set_rng_state_all(state[1])
