"""Where a recorded call comes from: the first Python frame outside torch and opwire, and the `nn.Module`.

Module names come from global forward hooks installed while recording: the outermost module called is
written as its class name, a submodule as that name plus its qualified name (`MLP.blocks.3.fc1`).
Both lookups are cheap: a dict hit per frame (by code object) and the top of a stack.
"""

from __future__ import annotations

import os
import sys
import warnings
import weakref
from typing import Any

import torch

__all__ = ["Locator"]

_SKIP = (os.path.dirname(torch.__file__) + os.sep, os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep)
# modules whose frames only wrap a call: `@deprecated` (typing_extensions, and warnings from Python 3.13), which
# torch puts on `dist.all_gather_into_tensor` and friends; the caller is the line to show
_WRAPPERS = frozenset(
    os.path.abspath(m.__file__) for m in (sys.modules.get("typing_extensions"), warnings) if m and m.__file__
)


class Locator:
    """Tracks the module stack (between `start` and `stop`) and finds the caller's source location."""

    def __init__(self) -> None:
        self._internal: dict[Any, bool] = {}
        self._stack: list[str] = []
        self._names: weakref.WeakKeyDictionary[torch.nn.Module, dict[int, str]] = weakref.WeakKeyDictionary()
        self._handles: list[Any] = []
        self._cwd = os.getcwd() + os.sep

    def start(self) -> None:
        """Install the global module hooks."""
        hooks = torch.nn.modules.module
        self._handles = [
            hooks.register_module_forward_pre_hook(self._enter),
            hooks.register_module_forward_hook(self._leave, always_call=True),
        ]

    def stop(self) -> None:
        """Remove the hooks."""
        for h in self._handles:
            h.remove()
        self._handles = []
        self._stack.clear()

    def _enter(self, module: torch.nn.Module, _args: Any) -> None:
        if not self._stack:
            names = self._names.get(module)
            if names is None:
                root = type(module).__name__
                names = {id(sub): f"{root}.{q}" if q else root for q, sub in module.named_modules()}
                self._names[module] = names
            self._root = names
            self._stack.append(names.get(id(module), type(module).__name__))
        else:
            self._stack.append(self._root.get(id(module), f"{self._stack[-1]}.<{type(module).__name__}>"))

    def _leave(self, _module: torch.nn.Module, _args: Any, _out: Any) -> None:
        if self._stack:
            self._stack.pop()

    def module(self) -> str:
        """Qualified name of the innermost module running ("" outside any module)."""
        return self._stack[-1] if self._stack else ""

    def source(self) -> str:
        """`file:line in function` of the first frame outside torch and opwire ("" when there is none)."""
        frame = sys._getframe(1)
        internal = self._internal
        while frame is not None:
            code = frame.f_code
            hit = internal.get(code)
            if hit is None:
                name = code.co_filename
                hit = internal[code] = name.startswith(_SKIP) or name.startswith("<") or name in _WRAPPERS
            if not hit:
                name = code.co_filename
                shown = name[len(self._cwd) :] if name.startswith(self._cwd) else name
                return f"{shown}:{frame.f_lineno} in {code.co_name}"
            frame = frame.f_back  # type: ignore[assignment]
        return ""
