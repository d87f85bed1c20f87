"""Kernels that trust companion shapes or views: attention and pad backwards, views, FFT dims, fused optimizers."""

from __future__ import annotations

import math

from opwire.proxy_executor.precondition_families.common import (
    Args,
    Builder,
    Check,
    common_rules_only,
    is_tensor,
    same_shape,
    shape_of,
    static,
)

__all__ = ["CHECKS"]


def _attention_backward(args: Args) -> str | None:
    q, k, v = args.get("query"), args.get("key"), args.get("value")
    if not all(is_tensor(t) for t in (q, k, v)):
        return None
    if not q.dim() == k.dim() == v.dim() == 4:
        return "query, key and value must be 4-D (batch, heads, length, width)"
    if int(q.shape[0]) != int(k.shape[0]) or shape_of(k)[:3] != shape_of(v)[:3] or int(q.shape[3]) != int(k.shape[3]):
        return f"query {shape_of(q)}, key {shape_of(k)} and value {shape_of(v)} do not fit together"
    out_shape = (*shape_of(q)[:3], int(v.shape[3]))
    wrong = same_shape(args, ("out", "grad_out", "grad_out_"), out_shape, "the attention output")
    if wrong is not None:
        return wrong
    lse = args.get("logsumexp")
    b, h, length = shape_of(q)[:3]
    if is_tensor(lse) and (lse.dim() != 3 or shape_of(lse)[:2] != (b, h) or int(lse.shape[2]) < length):
        return f"logsumexp must be ({b}, {h}, {length}), got {shape_of(lse)}"
    return None


def _as_strided(args: Args) -> str | None:
    x, size, stride = args.get("self"), args.get("size"), args.get("stride")
    if not is_tensor(x) or size is None or stride is None:
        return None
    if len(size) != len(stride) or any(s < 0 for s in size) or any(s < 0 for s in stride):
        return f"size {list(size)} and stride {list(stride)} must have one non-negative value per dimension"
    offset = args.get("storage_offset")
    offset = x.storage_offset() if offset is None else int(offset)
    if offset < 0:
        return f"storage_offset must be non-negative, got {offset}"
    if math.prod(size) == 0:
        return None
    end = offset + sum((s - 1) * st for s, st in zip(size, stride, strict=True))
    have = x.untyped_storage().nbytes() // max(x.element_size(), 1)
    if end >= have:
        return f"the view reaches element {end} of a storage of {have} elements"
    src = args.get("src")
    if is_tensor(src) and shape_of(src) != tuple(size):
        return f"src must have the view's shape {tuple(size)}, got {shape_of(src)}"
    return None


def _pad_backward(op: str) -> Check:
    dims = int(op.partition("_pad")[2][0])
    reflect = "reflection" in op

    def check(args: Args) -> str | None:
        grad, x, pad = args.get("grad_output"), args.get("self"), args.get("padding")
        if not (is_tensor(grad) and is_tensor(x)) or pad is None:
            return None
        pad = [int(p) for p in pad]
        if len(pad) != 2 * dims or x.dim() < dims or grad.dim() != x.dim():
            return f"padding must have {2 * dims} values and grad_output the input's {x.dim()} dimensions"
        if shape_of(grad)[:-dims] != shape_of(x)[:-dims]:
            return f"grad_output must share the input's leading dimensions {shape_of(x)[:-dims]}, got {shape_of(grad)}"
        for j in range(dims):  # padding lists the last dimension first
            size, left, right = int(x.shape[-1 - j]), pad[2 * j], pad[2 * j + 1]
            if int(grad.shape[-1 - j]) != size + left + right:
                return f"grad_output's dimension {-1 - j} must be {size + left + right}, got {int(grad.shape[-1 - j])}"
            if reflect and not (0 <= left < size and 0 <= right < size):
                return f"reflection padding ({left}, {right}) must be non-negative and shorter than {size}"
        return None

    return check


def _resize_as(args: Args) -> str | None:
    x, template = args.get("self"), args.get("the_template")
    if not (is_tensor(x) and is_tensor(template)):
        return None
    if x._base is not None or x.storage_offset() != 0:
        return "resize_as_ resizes a view (another tensor shares the storage it changes); resize a fresh tensor"
    return None


def _fft(args: Args) -> str | None:
    x, dims, norm = args.get("self"), args.get("dim"), args.get("normalization")
    if not is_tensor(x):
        return None
    rank = max(x.dim(), 1)
    for d in dims or ():
        if not -rank <= d < rank:
            return f"dim {d} is out of range for a tensor of {x.dim()} dimensions"
    if norm not in (0, 1, 2):
        return f"normalization must be 0, 1 or 2, got {norm!r}"
    return None


_REQUIRED_LISTS = ("grads", "exp_avgs", "exp_avg_sqs", "state_sums", "state_steps")


def _fused_optimizer(args: Args) -> str | None:
    params = args.get("self")
    if params is None:
        return None
    n = len(params)
    for name, v in args.items():
        if name == "self" or not isinstance(v, (list, tuple)) or not all(is_tensor(t) for t in v):
            continue
        needed = name in _REQUIRED_LISTS or (name == "max_exp_avg_sqs" and args.get("amsgrad"))
        needed = needed or (name == "momentum_buffer_list" and args.get("momentum") and not args.get("is_first_step"))
        if len(v) != n and (needed or v):
            return f"{name} must hold one tensor per parameter ({n}), got {len(v)}"
        for i, t in enumerate(v):
            if name == "state_steps":
                if t.numel() != 1:
                    return f"state_steps[{i}] must be a one-element tensor, got shape {shape_of(t)}"
            elif shape_of(t) != shape_of(params[i]):
                return f"{name}[{i}] must have the parameter's shape {shape_of(params[i])}, got {shape_of(t)}"
    for name in ("grad_scale", "found_inf", "lr"):
        t = args.get(name)
        if is_tensor(t) and t.numel() != 1:
            return f"{name} must be a one-element tensor, got shape {shape_of(t)}"
    return None


def _conv_double_backward(args: Args) -> str | None:
    x, w, g = args.get("self"), args.get("weight"), args.get("gO")
    if not (is_tensor(x) and is_tensor(w) and is_tensor(g)):
        return None
    if not x.dim() == w.dim() == g.dim() >= 3:
        return f"self {shape_of(x)}, weight {shape_of(w)} and gO {shape_of(g)} must share one rank of at least 3"
    groups = int(args.get("groups") or 1)
    out_channels = int(w.shape[1]) * groups if args.get("transposed") else int(w.shape[0])
    if shape_of(g)[:2] != (int(x.shape[0]), out_channels):
        return f"gO must be (batch {int(x.shape[0])}, {out_channels} output channels, ...), got {shape_of(g)}"
    wrong = same_shape(args, ("ggI",), shape_of(x), "self") or same_shape(args, ("ggW",), shape_of(w), "weight")
    ggb = args.get("ggb")
    if wrong is None and is_tensor(ggb) and ggb.numel() != out_channels:
        wrong = f"ggb must have one value per output channel ({out_channels}), got shape {shape_of(ggb)}"
    return wrong


def _weight_norm(args: Args) -> str | None:
    v = args.get("v", args.get("saved_v"))
    g = args.get("g", args.get("saved_g"))
    if not (is_tensor(v) and is_tensor(g)):
        return None
    dim = int(args.get("dim", 0) or 0)
    if dim != -1 and not -max(v.dim(), 1) <= dim < max(v.dim(), 1):
        return f"dim {dim} is out of range for v of shape {shape_of(v)}"
    per = 1 if dim == -1 or v.dim() == 0 else int(v.shape[dim])
    for name in ("g", "saved_g", "saved_norms"):
        t = args.get(name)
        if is_tensor(t) and t.numel() != per:
            return f"{name} must have one value per slice of v along dim {dim} ({per}), got shape {shape_of(t)}"
    return same_shape(args, ("grad_w",), shape_of(v), "v")


def _foreach(args: Args) -> str | None:
    lists = {k: v for k, v in args.items() if isinstance(v, (list, tuple)) and v and is_tensor(v[0])}
    lengths = {len(v) for v in lists.values()}
    if len(lengths) > 1:
        return f"the tensor lists must have one length, got {', '.join(f'{k}: {len(v)}' for k, v in lists.items())}"
    return None


CHECKS: dict[str, Builder] = {
    "attention_backward": static(_attention_backward),
    "as_strided": static(_as_strided),
    "pad_backward": _pad_backward,
    "resize_as": static(_resize_as),
    "fft": static(_fft),
    "fused_optimizer": static(_fused_optimizer),
    "foreach": static(_foreach),
    "weight_norm": static(_weight_norm),
    "linalg": static(common_rules_only),
    "dense_out": static(common_rules_only),
    "strided_only": static(common_rules_only),
    "conv_double_backward": static(_conv_double_backward),
}
"""Family -> its builder."""
