"""What the allowlist review took out, and the checks some allowlisted kernels need before they run.

Some kernels trust their index, offset or size arguments: their contract is that the caller (autograd,
a decomposition, the compiler) already checked them. A file is no such caller. The executor fuzz
(tests/proxy_executor/op_fuzz_worker.py, run at length by `python tests/proxy_executor/op_fuzz.py`) fuzzes
every allowlisted op's index-like and size-like arguments in a child process; each crash it finds
becomes an entry here: a precondition checked before the kernel runs, or a removal with its reason.

- `REMOVED`: ops `torch.Tag.core` or export lists that a file may not run (they stay callable through
  `allow_ops=` / `--allow-op`, on the caller's responsibility).
- `PRECONDITIONS`: op -> a check of its argument values, run before the kernel; a failure is a
  KernelError naming the node (nothing ran).
- `refused_value`: argument values refused at bind time whatever the op (`unsafe=True`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["PRECONDITIONS", "REMOVED", "Precondition", "precondition_for", "refused_value"]

REMOVED: dict[str, str] = {
    "aten::max_pool2d_with_indices_backward": (
        "a backward kernel that trusts the indices its forward produced: bad indices write out of bounds"
    ),
    "aten::max_pool3d_with_indices_backward": (
        "a backward kernel that trusts the indices its forward produced: bad indices write out of bounds"
    ),
    "aten::embedding_dense_backward": "a backward kernel that trusts its indices (exported forward graphs never hold it)",
    "aten::_embedding_bag_backward": "a backward kernel that trusts offsets and indices its forward produced",
    "aten::resize_": "resizes its input in place (a storage-level change exported programs never make on inputs)",
}
"""Ops left out of the allowlist by review, with the reason (the allowlist generator subtracts them)."""

Precondition = Callable[[list[Any], dict[str, Any]], str | None]


def _arg(pos: list[Any], kw: Mapping[str, Any], i: int, name: str) -> Any:
    return pos[i] if i < len(pos) else kw.get(name)


PRECONDITIONS: dict[str, Precondition] = {}
"""Op ("aten::op.overload" spelling of the allowlist) -> check returning what is wrong, or None."""


def precondition_for(op: str) -> Precondition | None:
    """The precondition of allowlisted op `op`, if its kernel needs one."""
    return PRECONDITIONS.get(op)


def refused_value(arg_name: str, value: Any) -> str | None:
    """Why a constant argument value is refused whatever the op (bind time), or None."""
    if arg_name == "unsafe" and value is True:
        return "unsafe=True asks the kernel to skip its bounds checks; a file cannot ask that (pass unsafe=False)"
    return None
