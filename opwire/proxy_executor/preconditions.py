"""The checks admitted kernels need before they run, and argument values refused whatever the op.

Some kernels trust their index, offset or companion-tensor arguments: their contract is that the caller
(autograd, a decomposition, the compiler) already checked them. A file is no such caller. The op policy
(`allowlist.txt`, derived by `opset_source` with the rules of `policy_rules`) admits those kernels with the
precondition of their family (`precondition_families`), checked before the kernel runs; a failure is a
KernelError naming the node (nothing ran). The executor fuzz (tests/proxy_executor/op_fuzz_worker.py)
fuzzes admitted ops in a child process; each crash it finds becomes a family check or a refusal.

- `precondition_for`: the check of an admitted op, given its schema's argument names: every tensor strided
  with data (`unreadable`), every tensor it writes a dense buffer (`overlapping_output`), then the family's
  check; a value the check cannot read is refused too;
- `refused_value`: argument values refused at bind time whatever the op (`unsafe=True`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from opwire.errors import first_line
from opwire.proxy_executor.allowlist import policy_entry
from opwire.proxy_executor.precondition_families import CHECKS, Args
from opwire.proxy_executor.precondition_families.common import dense, is_tensor
from opwire.schema.ops import op_schema

__all__ = [
    "Precondition", "family_of", "overlapping_output", "precondition_for", "refused_value", "unreadable",
]  # fmt: skip

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
    written = () if family in _METADATA_WRITERS else _written(op)
    if family in _OUT_ONLY and not written:
        return None  # a functional overload of an op whose only precondition is on its out= tensors

    def run(pos: list[Any], kw: dict[str, Any], meta_ok: bool = False) -> str | None:
        args = Args(zip(order, pos, strict=False))
        args.update(kw)
        try:
            wrong = unreadable(args, family, meta_ok) if family not in _SPARSE_INPUTS else None
            return wrong or overlapping_output(args, written) or check(args)
        except _UNREADABLE as exc:  # a value the check cannot read is no value the kernel may trust
            return f"the arguments do not fit the {family} family's precondition ({first_line(exc)})"

    def on_meta(pos: list[Any], kw: dict[str, Any]) -> str | None:
        return run(pos, kw, True)

    run.on_meta = on_meta  # type: ignore[attr-defined]  # verdicts' re-run on meta copies of passing arguments
    return run


_SPARSE_INPUTS = frozenset({"sparse_conversion"})
"""Families whose kernels take sparse tensors by design."""
_OUT_ONLY = frozenset({"dense_out"})
"""Families whose precondition is on the out= tensors alone (no check of a functional form such as _softmax)."""
_METADATA_WRITERS = frozenset({"as_strided", "resize_as"})
"""Families whose written argument changes its metadata, not its elements (any strides are fine)."""
_UNREADABLE = (RuntimeError, TypeError, ValueError, NotImplementedError, IndexError, OverflowError)


def unreadable(args: Args, family: str, meta_ok: bool = False) -> str | None:
    """Why a tensor argument of a trusting kernel is not a strided tensor with data (sparse, oneDNN, meta), or None.

    The kernels the families guard read their tensors' memory as dense buffers, and their checks read values;
    a file can make sparse (`to_sparse`), oneDNN (`to_mkldnn`) and meta (`empty(device=meta)`) tensors.
    `meta_ok`: the `verdicts` re-run on meta copies of arguments that passed with data (their device is in the
    layout key), where a meta tensor is the copy and not the file's."""
    tensor, strided = _torch_types()
    for name, v in args.items():  # one pass, no call per element: optimizers' foreach lists hold every parameter
        for t in v if isinstance(v, (list, tuple)) else (v,):
            if isinstance(t, tensor) and (t.layout is not strided or (t.is_meta and not meta_ok)):
                kind = "meta" if t.layout is strided else str(t.layout).removeprefix("torch.")
                return f"{name} is a {kind} tensor; the {family} family's kernels read strided tensors with data"
    return None


def overlapping_output(args: Args, written: Sequence[str]) -> str | None:
    """Why a tensor the kernel writes (`written`: out=, grad_input, running stats) is no dense buffer of its own.

    max_pool3d_with_indices_backward.grad_input with an overlapping grad_input wrote past its storage (heap
    corruption: a later call aborted; found by the input fuzz)."""
    if not written:
        return None
    read = [t for k, v in args.items() if k not in written for t in (v if isinstance(v, (list, tuple)) else (v,))]
    storages = {t.untyped_storage().data_ptr() for t in read if is_tensor(t) and t.layout is _strided()} - {0}
    for name in written:
        t = args.get(name)
        if not is_tensor(t):
            continue
        if not dense(t):
            return f"{name} is written as a dense buffer: it must be contiguous (or channels-last), got {t.stride()}"
        if t.untyped_storage().data_ptr() in storages:  # linalg_eigvalsh.out into its input: heap corruption
            return f"{name} shares memory with an input the kernel reads; write the result to a tensor of its own"
    return None


def _written(op: str) -> tuple[str, ...]:
    """The names of op `op`'s Tensor arguments its schema marks written (`Tensor(a!)`)."""
    import torch  # deferred: the policy's tables are read without torch

    ns, _, rest = op.partition("::")
    name, _, overload = rest.partition(".")
    packet = getattr(getattr(torch.ops, ns, None), name, None)
    fn = getattr(packet, overload or "default", None) if packet is not None else None
    if fn is None:
        return ()
    return tuple(a.name for a in op_schema(fn).arguments if a.is_write and a.type == "Tensor")


@functools.cache
def _torch_types() -> tuple[Any, Any]:
    import torch  # deferred: the policy's tables are read without torch

    return torch.Tensor, torch.strided


def _strided() -> Any:
    return _torch_types()[1]


def refused_value(arg_name: str, value: Any) -> str | None:
    """Why a constant argument value is refused whatever the op (bind time), or None."""
    if arg_name == "unsafe" and value is True:
        return "unsafe=True asks the kernel to skip its bounds checks; a file cannot ask that (pass unsafe=False)"
    return None
