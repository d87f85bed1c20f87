"""What a run may not leave behind: every executor entry point runs its work inside a `RunGuard`.

On exit the guard puts back what it found: grad mode, the deterministic-algorithms flags, the torch
dispatch and function mode stacks (modes a run pushed are popped), and, when the work can draw random
numbers, the CPU generator's state (and every initialized CUDA device's). Kernel warnings (torch's
`TORCH_WARN`, e.g. `add.out` resizing a wrong-shaped `out`) never reach the host's stderr directly:
they are collected while the work runs and re-issued once, as `OpwireWarning`s naming where they came
from, so the host's warning filters decide what happens to them.

Two routes are covered: Python warnings (collected by swapping the `warnings` module's display hook
for the duration of the run; another thread's warning in that window goes where it would have gone),
and warnings torch's C++ handler prints itself (ops called through `torch.ops` print `[W...] Warning:`
lines straight to file descriptor 2, and torch gives Python no way to install its warning handler): while
any guard is active, fd 2 points at an in-memory file; torch's warning lines in it are re-issued the same
way, and every other line (the host's own output from another thread in that window) is written back to
the host's stderr when the guard ends, unchanged and in order.
"""

from __future__ import annotations

import os
import re
import threading
import warnings
from typing import Any

import torch
from torch.utils._python_dispatch import _pop_mode

from opwire.errors import OpwireWarning

__all__ = ["RunGuard", "held_descriptors"]

_MAX_WARNINGS = 8  # re-issued per run; the rest are counted in the last one
_MAX_TEXT = 300


class RunGuard:
    """Context manager restoring RNG (when `rng`), grad mode, modes and flags; collects kernel warnings."""

    __slots__ = ("_det", "_fn_modes", "_grad", "_modes", "_rng", "_shown", "_thread", "rng", "warned", "where")

    def __init__(self, where: str, rng: bool = True) -> None:
        self.where = where
        self.rng = rng
        self.warned: list[str] = []

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
        _STDERR.enter()
        return self

    def _collect(self, msg: Any) -> None:
        if threading.get_ident() != self._thread and self._shown is not None:
            self._shown(msg)  # another thread's warning: where it would have gone
            return
        self.warned.append(str(msg.message))

    def __exit__(self, *exc: object) -> None:
        printed = _STDERR.exit()
        if printed:
            self.warned += [line for line in printed.splitlines() if line.strip()]
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
        seen: dict[str, int] = {}
        for text in self.warned:
            one_line = " ".join(text.split())
            key = one_line[:_MAX_TEXT] + ("..." if len(one_line) > _MAX_TEXT else "")
            seen[key] = seen.get(key, 0) + 1
        for i, (text, n) in enumerate(seen.items()):
            if i == _MAX_WARNINGS:
                warnings.warn(f"{self.where}: {len(seen) - i} more kernel warnings", OpwireWarning, stacklevel=3)
                break
            times = f" ({n} times)" if n > 1 else ""
            warnings.warn(f"{self.where}: the kernel warned{times}: {text}", OpwireWarning, stacklevel=3)
        self.warned = []


class _Fd2Capture:
    """fd 2 redirected to an in-memory file while any guard is active (a process-wide count under a lock)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.depth = 0
        self.saved = -1
        self.mem = -1

    def enter(self) -> None:
        with self.lock:
            self.depth += 1
            if self.depth > 1:
                return
            try:
                if self.mem < 0:
                    self.mem = os.memfd_create("opwire-stderr", os.MFD_CLOEXEC)
                self.saved = os.dup(2)
                os.dup2(self.mem, 2)
            except OSError:
                self.saved = -1  # no fd 2 to redirect (a daemon): nothing to capture

    def exit(self) -> str:
        """Restore fd 2; return torch's warning lines, and write every other line back to the host's stderr."""
        with self.lock:
            self.depth -= 1
            if self.depth > 0 or self.saved < 0:
                return ""
            size = os.lseek(self.mem, 0, os.SEEK_CUR)
            data = os.pread(self.mem, size, 0) if size else b""
            warned: list[bytes] = []
            host: list[bytes] = []
            for line in data.splitlines(keepends=True):
                (warned if _TORCH_WARNING.match(line) else host).append(line)
            if host:  # the host's own output in the window (another thread, a library): where it was going
                _write_all(self.saved, b"".join(host))
            os.dup2(self.saved, 2)
            os.close(self.saved)
            self.saved = -1
            if size:
                os.ftruncate(self.mem, 0)
                os.lseek(self.mem, 0, os.SEEK_SET)
            return b"".join(warned)[: 1 << 16].decode("utf-8", "replace")


_STDERR = _Fd2Capture()


def held_descriptors() -> list[int]:
    """Descriptors the guard keeps process-wide (its stderr memfd): a forked child that closes the others must
    keep these, or their numbers are reused and the guard reads and truncates another file."""
    return [_STDERR.mem] if _STDERR.mem >= 0 else []


_TORCH_WARNING = re.compile(rb"^\[W\d{4} [^\]]*\] Warning: ")
"""The line c10's default warning handler prints for a TORCH_WARN: `[W1202 03:56:47.779 Resize.cpp:30] Warning: ...`."""


def _write_all(fd: int, data: bytes) -> None:
    while data:
        try:
            data = data[os.write(fd, data) :]
        except OSError:
            return  # the host's stderr is gone: nothing to keep


def _rng_state() -> tuple[torch.Tensor, list[torch.Tensor] | None]:
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None  # type: ignore[no-untyped-call]
    return torch.default_generator.get_state(), cuda


def _set_rng_state(state: tuple[torch.Tensor, list[torch.Tensor] | None]) -> None:
    torch.default_generator.set_state(state[0])
    if state[1] is not None:
        torch.cuda.set_rng_state_all(state[1])
