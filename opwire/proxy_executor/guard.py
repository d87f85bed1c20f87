"""What a run may not leave behind: every executor entry point runs its work inside a `RunGuard`.

On exit the guard puts back what it found: grad mode, the deterministic-algorithms flags, the torch
dispatch and function mode stacks (modes a run pushed are popped), and, when the work can draw random
numbers, the CPU generator's state (and every initialized CUDA device's). Kernel warnings (torch's
`TORCH_WARN`, e.g. `add.out` resizing a wrong-shaped `out`) never reach the host's stderr directly:
they are collected while the work runs and re-issued once, as `OpwireWarning`s naming where they came
from, so the host's warning filters decide what happens to them.

Warnings are collected by swapping the `warnings` module's display hook for the duration of the run;
a warning another thread shows in that window is passed on to the hook it would have reached.
"""

from __future__ import annotations

import threading
import warnings
from typing import Any

import torch

from opwire.errors import OpwireWarning

__all__ = ["RunGuard"]

_MAX_WARNINGS = 8  # re-issued per run; the rest are counted in the last one
_MAX_TEXT = 300


class RunGuard:
    """Context manager restoring RNG (when `rng`), grad mode, modes and flags; collects kernel warnings."""

    __slots__ = ("_det", "_fn_modes", "_grad", "_modes", "_rng", "_shown", "_thread", "rng", "where", "warned")

    def __init__(self, where: str, rng: bool = True) -> None:
        self.where = where
        self.rng = rng
        self.warned: list[str] = []

    def __enter__(self) -> RunGuard:
        self._grad = torch.is_grad_enabled()
        self._det = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled())
        self._modes = torch._C._len_torch_dispatch_stack()
        self._fn_modes = torch._C._len_torch_function_stack()
        self._rng = _rng_state() if self.rng else None
        self._thread = threading.get_ident()
        self._shown = getattr(warnings, "_showwarnmsg", None)
        warnings._showwarnmsg = self._collect  # type: ignore[attr-defined]
        return self

    def _collect(self, msg: Any) -> None:
        if threading.get_ident() != self._thread and self._shown is not None:
            self._shown(msg)  # another thread's warning: where it would have gone
            return
        self.warned.append(str(msg.message))

    def __exit__(self, *exc: object) -> None:
        warnings._showwarnmsg = self._shown  # type: ignore[attr-defined]
        if torch.is_grad_enabled() != self._grad:
            torch._C._set_grad_enabled(self._grad)
        if (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()) != (
            self._det
        ):
            torch.use_deterministic_algorithms(self._det[0], warn_only=self._det[1])
        while torch._C._len_torch_dispatch_stack() > self._modes:
            torch._C._pop_torch_dispatch_stack()
        while torch._C._len_torch_function_stack() > self._fn_modes:
            torch._C._pop_torch_function_stack()
        if self._rng is not None:
            _set_rng_state(self._rng)
        if self.warned:
            self._reissue()

    def _reissue(self) -> None:
        seen: dict[str, int] = {}
        for text in self.warned:
            one_line = " ".join(text.split())
            key = one_line[:_MAX_TEXT] + ("..." if len(one_line) > _MAX_TEXT else "")
            seen[key] = seen.get(key, 0) + 1
        for i, (text, n) in enumerate(seen.items()):
            if i == _MAX_WARNINGS:
                warnings.warn(
                    f"{self.where}: {len(seen) - i} more kernel warnings", OpwireWarning, stacklevel=3
                )
                break
            times = f" ({n} times)" if n > 1 else ""
            warnings.warn(f"{self.where}: the kernel warned{times}: {text}", OpwireWarning, stacklevel=3)
        self.warned = []


def _rng_state() -> tuple[torch.Tensor, list[torch.Tensor] | None]:
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None
    return torch.default_generator.get_state(), cuda


def _set_rng_state(state: tuple[torch.Tensor, list[torch.Tensor] | None]) -> None:
    torch.default_generator.set_state(state[0])
    if state[1] is not None:
        torch.cuda.set_rng_state_all(state[1])
