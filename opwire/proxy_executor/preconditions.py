"""The checks admitted kernels need before they run, and argument values refused whatever the op.

Some kernels trust their index, offset or companion-tensor arguments: their contract is that the caller
(autograd, a decomposition, the compiler) already checked them. A file is no such caller. The op policy
(`allowlist.txt`, derived by `opset_source` with the rules of `policy_rules`) admits those kernels with the
precondition of their family (`precondition_families`), checked before the kernel runs; a failure is a
KernelError naming the node (nothing ran). The executor fuzz (tests/proxy_executor/op_fuzz_worker.py)
fuzzes admitted ops in a child process; each crash it finds becomes a family check or a refusal.

- `precondition_for`: the check of an admitted op, given its schema's argument names;
- `refused_value`: argument values refused at bind time whatever the op (`unsafe=True`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from opwire.proxy_executor.allowlist import policy_entry
from opwire.proxy_executor.precondition_families import CHECKS, Args

__all__ = ["Precondition", "family_of", "precondition_for", "refused_value"]

Precondition = Callable[[list[Any], dict[str, Any]], str | None]


def family_of(op: str) -> str | None:
    """The precondition family guarding op `op` ("aten::lstm.input"), or None."""
    entry = policy_entry(op)
    return entry[1] if entry is not None and entry[0] == "precondition" else None


def precondition_for(op: str, names: Sequence[str] = ()) -> Precondition | None:
    """The precondition of op `op` whose schema's arguments are `names` (in order), if its kernel needs one."""
    family = family_of(op)
    if family is None:
        return None
    check = CHECKS[family](op)
    order = tuple(names)

    def run(pos: list[Any], kw: dict[str, Any]) -> str | None:
        args = Args(zip(order, pos, strict=False))
        args.update(kw)
        return check(args)

    return run


def refused_value(arg_name: str, value: Any) -> str | None:
    """Why a constant argument value is refused whatever the op (bind time), or None."""
    if arg_name == "unsafe" and value is True:
        return "unsafe=True asks the kernel to skip its bounds checks; a file cannot ask that (pass unsafe=False)"
    return None
