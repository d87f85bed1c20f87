"""Norm kernels: per-channel and per-row companion tensors of batch, layer and group norm."""

from __future__ import annotations

import math

from opwire.proxy_executor.precondition_families.common import (
    Args,
    Builder,
    Check,
    is_tensor,
    same_shape,
    shape_of,
    static,
)

__all__ = ["CHECKS"]


_PER_CHANNEL = (
    "weight", "bias", "running_mean", "running_var", "save_mean", "save_invstd", "save_var", "save_var_transform",
    "mean", "invstd", "sum_dy", "sum_dy_xmu",
)  # fmt: skip


def _batch_norm(op: str) -> Check:
    evaluation = "no_update" in op or "no_training" in op  # eval-mode kernels: they read the running stats

    def check(args: Args) -> str | None:
        return _batch_norm_call(args, False if evaluation else None)

    return check


def _batch_norm_call(args: Args, training: bool | None) -> str | None:
    x = args.get("input")
    if not is_tensor(x):
        return None
    if x.dim() < 2:
        return f"the input needs at least 2 dimensions (batch, channels), got {x.dim()}"
    channels = int(x.shape[1])
    if training is None:
        training = next((args[k] for k in ("training", "train", "update") if k in args), None)
    for name in _PER_CHANNEL:
        t = args.get(name)
        unread = not training and name.startswith("save_") and t is not None and t.numel() == 0  # eval backward
        if is_tensor(t) and (t.dim() != 1 or t.numel() != channels) and not unread:
            return f"{name} must have one value per channel ({channels}), got shape {shape_of(t)}"
    wrong = same_shape(args, ("grad_out", "grad_output"), shape_of(x), "the input")
    if wrong is not None:
        return wrong
    saved = "save_mean" in args
    if saved and training:
        var = args.get("save_invstd", args.get("save_var", args.get("save_var_transform")))
        if args.get("save_mean") is None or var is None:
            return "a training-mode backward needs the saved batch statistics (save_mean and save_invstd/save_var)"
    elif training is False and (args.get("running_mean") is None or args.get("running_var") is None):
        return "training=False (and the eval-mode kernels) needs running_mean and running_var"
    return None


def _layer_norm(args: Args) -> str | None:
    x, shape = args.get("input"), args.get("normalized_shape")
    if not is_tensor(x) or shape is None:
        return None
    shape = tuple(int(s) for s in shape)
    if len(shape) > x.dim() or shape_of(x)[x.dim() - len(shape) :] != shape:
        return f"normalized_shape {shape} must be the input's trailing shape, got input shape {shape_of(x)}"
    inner = math.prod(shape)
    rows = x.numel() // inner if inner else 0
    for name, want in (("weight", inner), ("bias", inner), ("mean", rows), ("rstd", rows)):
        t = args.get(name)
        if is_tensor(t) and t.numel() != want:
            return f"{name} must have {want} values, got shape {shape_of(t)}"
    return same_shape(args, ("grad_out",), shape_of(x), "the input")


def _group_norm(args: Args) -> str | None:
    x = args.get("input")
    n, c, hw, groups = (args.get(k) for k in ("N", "C", "HxW", "group"))
    if not is_tensor(x) or None in (n, c, hw, groups):
        return None
    if x.dim() < 2 or int(x.shape[0]) != n or int(x.shape[1]) != c or x.numel() != n * c * hw:
        return f"N, C, HxW ({n}, {c}, {hw}) must describe the input of shape {shape_of(x)}"
    if groups <= 0 or c % groups:
        return f"group {groups} must be positive and divide C ({c})"
    for name, want in (("weight", c), ("bias", c), ("mean", n * groups), ("rstd", n * groups)):
        t = args.get(name)
        if is_tensor(t) and t.numel() != want:
            return f"{name} must have {want} values, got shape {shape_of(t)}"
    return same_shape(args, ("grad_out",), shape_of(x), "the input")


CHECKS: dict[str, Builder] = {
    "batch_norm": _batch_norm,
    "layer_norm": static(_layer_norm),
    "group_norm": static(_group_norm),
}
"""Family -> its builder."""
