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
    "aten::adaptive_max_pool2d_backward": (
        "a backward kernel that trusts the indices its forward produced: bad indices write out of bounds"
    ),
    "aten::adaptive_max_pool3d_backward": (
        "a backward kernel that trusts the indices its forward produced: bad indices write out of bounds"
    ),
    "aten::mkldnn_rnn_layer_backward": "a oneDNN-internal backward kernel that trusts its workspace tensors",
    "aten::embedding_dense_backward": (
        "a backward kernel that trusts its indices (exported forward graphs never hold it)"
    ),
    "aten::_embedding_bag_backward": "a backward kernel that trusts offsets and indices its forward produced",
    "aten::resize_": "resizes its input in place (a storage-level change exported programs never make on inputs)",
}
"""Ops left out of the allowlist by review, with the reason (the allowlist generator subtracts them)."""

Precondition = Callable[[list[Any], dict[str, Any]], str | None]


def _arg(pos: list[Any], kw: Mapping[str, Any], i: int, name: str) -> Any:
    return pos[i] if i < len(pos) else kw.get(name)


def _fft_dims(pos: list[Any], kw: dict[str, Any]) -> str | None:
    """`_fft_r2c/_fft_c2r/_fft_c2c`: every dim inside the input's rank, normalization 0, 1 or 2 (SIGSEGV otherwise)."""
    x, dims, norm = _arg(pos, kw, 0, "self"), _arg(pos, kw, 1, "dim"), _arg(pos, kw, 2, "normalization")
    rank = max(x.dim(), 1)
    for d in dims or ():
        if not -rank <= d < rank:
            return f"dim {d} is out of range for a tensor of {x.dim()} dimensions"
    if norm not in (0, 1, 2):
        return f"normalization must be 0, 1 or 2, got {norm!r}"
    return None


def _batch_norm(stats: bool, has_training: bool = True) -> Precondition:
    """Batch-norm kernels: per-channel tensors of the input's channel count, and running stats when not training."""

    def check(pos: list[Any], kw: dict[str, Any]) -> str | None:
        x = _arg(pos, kw, 0, "input")
        if x.dim() < 2:
            return f"the input needs at least 2 dimensions (batch, channels), got {x.dim()}"
        channels = x.shape[1]
        names = ["weight", "bias", "running_mean", "running_var"] if stats else ["weight", "bias"]
        given = {n: _arg(pos, kw, 1 + i, n) for i, n in enumerate(names)}
        for name, t in given.items():
            if t is not None and (t.dim() != 1 or t.numel() != channels):
                return f"{name} must have one value per channel ({channels}), got shape {tuple(t.shape)}"
        training = _arg(pos, kw, 1 + len(names), "training") if has_training else False
        if not training and (not stats or given["running_mean"] is None or given["running_var"] is None):
            return "training=False needs running_mean and running_var"
        return None

    return check


PRECONDITIONS: dict[str, Precondition] = {
    "aten::_fft_r2c": _fft_dims,
    "aten::_fft_c2r": _fft_dims,
    "aten::_fft_c2c": _fft_dims,
    "aten::native_batch_norm": _batch_norm(stats=True),
    "aten::_native_batch_norm_legit": _batch_norm(stats=True),
    "aten::_native_batch_norm_legit.no_stats": _batch_norm(stats=False),
    "aten::_native_batch_norm_legit_no_training": _batch_norm(stats=True, has_training=False),
    "aten::_native_batch_norm_legit_functional": _batch_norm(stats=True),
    "aten::batch_norm": _batch_norm(stats=True),
}
"""Op ("aten::op.overload" spelling of the allowlist) -> check returning what is wrong, or None. Each entry
is a crash the per-op fuzz found (SIGSEGV on out-of-range FFT dims, on batch norm without running stats)."""


def precondition_for(op: str) -> Precondition | None:
    """The precondition of allowlisted op `op`, if its kernel needs one."""
    return PRECONDITIONS.get(op)


def refused_value(arg_name: str, value: Any) -> str | None:
    """Why a constant argument value is refused whatever the op (bind time), or None."""
    if arg_name == "unsafe" and value is True:
        return "unsafe=True asks the kernel to skip its bounds checks; a file cannot ask that (pass unsafe=False)"
    return None
