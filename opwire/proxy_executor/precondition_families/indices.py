"""Kernels that trust index and offset tensors: embedding bags, pooling indices, CTC targets, segments."""

from __future__ import annotations

import math

from opwire.proxy_executor.precondition_families.common import (
    Args,
    Builder,
    Check,
    dense,
    in_range,
    ints,
    is_tensor,
    non_decreasing,
    packed_batch_sizes,
    shape_of,
    static,
)

__all__ = ["CHECKS"]


def _embedding(args: Args) -> str | None:
    idx = args.get("indices")
    if not is_tensor(idx):
        return None
    w = args.get("weight", args.get("self"))
    rows = int(args["num_weights"]) if "num_weights" in args else int(w.shape[0]) if is_tensor(w) else None
    if rows is not None:
        wrong = in_range(idx, 0, rows, f"indices (rows of a {rows}-row table)")
        if wrong is not None:
            return wrong
    n = idx.numel()
    offsets = args.get("offsets")
    if is_tensor(offsets):
        wrong = non_decreasing(offsets, "offsets") or in_range(offsets, 0, n + 1, "offsets (positions in the indices)")
        if wrong is not None:
            return wrong
    for name in ("per_sample_weights", "offset2bag"):
        t = args.get(name)
        if is_tensor(t) and t.numel() not in (n, 0) and not (name == "offset2bag" and t.numel() == n + 1):
            return f"{name} must have one value per index ({n}), got shape {shape_of(t)}"
    grad = args.get("grad", args.get("grad_output"))
    if is_tensor(grad) and "offset2bag" not in args and "num_weights" in args and grad.dim() >= 1:
        if shape_of(grad)[:-1] != shape_of(idx) and grad.numel() != n * int(grad.shape[-1]):
            return f"grad must have shape indices.shape + (dim,) = {shape_of(idx)} + (dim,), got {shape_of(grad)}"
    if is_tensor(grad) and "offset2bag" in args and grad.dim() == 2:
        bags = int(grad.shape[0])
        wrong = in_range(args["offset2bag"], 0, max(bags, 1), f"offset2bag (bags of grad's {bags} rows)")
        if wrong is not None:
            return wrong
        bag_size = args.get("bag_size")
        if is_tensor(bag_size) and bag_size.numel() != bags:
            return f"bag_size must have one value per bag ({bags}), got shape {shape_of(bag_size)}"
        most = args.get("maximum_indices")
        if is_tensor(most) and most.numel() and args.get("mode") == 2:
            if shape_of(most) != shape_of(grad):
                return f"maximum_indices must have grad's shape {shape_of(grad)}, got {shape_of(most)}"
            return in_range(most, -1, rows if rows is not None else 0, "maximum_indices (table rows)")
    return None


def _pool_indices(op: str) -> Check:
    dims = 3 if "3d" in op else 2

    def check(args: Args) -> str | None:
        x, idx = args.get("self"), args.get("indices")
        if not (is_tensor(x) and is_tensor(idx)):
            return None
        if "output_size" in args and "grad_output" not in args:  # max_unpool: indices into the output plane
            plane = math.prod(int(s) for s in args["output_size"])
            if shape_of(idx) != shape_of(x):
                return f"indices must have the input's shape {shape_of(x)}, got {shape_of(idx)}"
        else:
            if x.dim() < dims:
                return f"the input needs at least {dims} dimensions, got {x.dim()}"
            plane = math.prod(shape_of(x)[-dims:])
            grad = args.get("grad_output")
            if is_tensor(grad) and shape_of(idx) != shape_of(grad):
                return f"indices must have grad_output's shape {shape_of(grad)}, got {shape_of(idx)}"
            if is_tensor(grad) and (grad.dim() != x.dim() or shape_of(grad)[:-dims] != shape_of(x)[:-dims]):
                return (
                    f"grad_output must share the input's leading dimensions {shape_of(x)[:-dims]}, got {shape_of(grad)}"
                )
        if not dense(idx):  # adaptive_max_pool3d_backward with overlapping indices: SIGSEGV (the input fuzz)
            return f"indices must be contiguous (or channels-last) as the forward made them, got strides {idx.stride()}"
        return in_range(idx, 0, plane, f"indices (positions in a plane of {plane})")

    return check


def _ctc(args: Args) -> str | None:
    lp, targets = args.get("log_probs"), args.get("targets")
    if not (is_tensor(lp) and is_tensor(targets)) or lp.dim() not in (2, 3):
        return None if not is_tensor(lp) else f"log_probs must be (time, batch, classes), got {shape_of(lp)}"
    steps, classes = int(lp.shape[0]), int(lp.shape[-1])
    batch = int(lp.shape[1]) if lp.dim() == 3 else 1
    inputs, lengths = ints(args.get("input_lengths")), ints(args.get("target_lengths"))
    if inputs is None or lengths is None:
        return "input_lengths and target_lengths must be integers"
    if len(inputs) != batch or len(lengths) != batch:
        return f"input_lengths and target_lengths must have one value per batch item ({batch})"
    if any(not 0 <= n <= steps for n in inputs):
        return f"input_lengths must lie in [0, {steps}] (the time steps)"
    if targets.is_floating_point():
        return f"targets must hold integers, got {targets.dtype}"
    room = int(targets.shape[-1]) if targets.dim() == 2 else targets.numel()
    if targets.dim() == 2 and int(targets.shape[0]) != batch:
        return f"targets must have one row per batch item ({batch}), got {shape_of(targets)}"
    if any(n < 0 for n in lengths) or (max(lengths) if targets.dim() == 2 else sum(lengths)) > room:
        return f"target_lengths must be non-negative and fit the {room} targets given"
    blank = int(args.get("blank", 0) or 0)
    if not 0 <= blank < classes:
        return f"blank {blank} must lie in [0, {classes})"
    wrong = in_range(targets, 0, classes, f"targets (classes of {classes})")
    if wrong is not None:
        return wrong
    grad, nll = args.get("grad"), args.get("neg_log_likelihood")
    if is_tensor(grad) and grad.numel() not in (batch, 1):
        return f"grad must have one value per batch item ({batch}), got shape {shape_of(grad)}"
    if is_tensor(nll) and nll.numel() != batch:
        return f"neg_log_likelihood must have one value per batch item ({batch}), got shape {shape_of(nll)}"
    alpha = args.get("log_alpha")
    width = 2 * (max(lengths) if lengths else 0) + 1
    if is_tensor(alpha) and (alpha.dim() != 3 or shape_of(alpha)[:2] != (batch, steps) or int(alpha.shape[2]) < width):
        return f"log_alpha must be ({batch}, {steps}, >= {width}), got {shape_of(alpha)}"
    return None


def _segments(args: Args) -> str | None:
    if "input_size" in args:  # _pack_padded_sequence_backward
        grad, size, b = args.get("grad"), args.get("input_size"), args.get("batch_sizes")
        if not (is_tensor(grad) and is_tensor(b)) or size is None or len(size) < 2:
            return None
        steps, batch = (size[1], size[0]) if args.get("batch_first") else (size[0], size[1])
        wrong = packed_batch_sizes(b, int(grad.shape[0]) if grad.dim() else -1)
        if wrong is None and (b.numel() > steps or int(b[0]) > batch):
            wrong = f"batch_sizes ({b.numel()} steps, first {int(b[0])}) must fit input_size {list(size)}"
        return wrong
    if "batch_sizes" in args:  # _pad_packed_sequence
        data, b = args.get("data"), args.get("batch_sizes")
        return packed_batch_sizes(b, int(data.shape[0]) if data.dim() else -1) if is_tensor(data) else None
    data, axis = args.get("data"), int(args.get("axis", 0))
    if not is_tensor(data) or not -data.dim() <= axis < max(data.dim(), 1):
        return None if not is_tensor(data) else f"axis {axis} is out of range"
    extent = int(data.shape[axis])
    lengths, offsets = args.get("lengths"), args.get("offsets")
    if is_tensor(lengths):
        if lengths.numel() and (bool((lengths < 0).any()) or int(lengths.sum(-1).max()) > extent):
            return f"lengths must be non-negative and sum to at most the reduced dimension ({extent})"
        segments = int(lengths.shape[-1]) if lengths.dim() else 1
    elif is_tensor(offsets):
        flat = offsets.reshape(-1, offsets.shape[-1]) if offsets.dim() else offsets.reshape(1, 1)
        if any(non_decreasing(row, "offsets") for row in flat):
            return "offsets must be non-decreasing"
        wrong = in_range(offsets, 0, extent + 1, f"offsets (positions in a dimension of {extent})")
        if wrong is not None:
            return wrong
        segments = int(offsets.shape[-1]) - 1
    else:
        return None
    for name in ("grad", "output"):
        t = args.get(name)
        if is_tensor(t) and (t.dim() != data.dim() or int(t.shape[axis]) != segments):
            return f"{name} must have {segments} segments along axis {axis}, got shape {shape_of(t)}"
    return None


MAX_POLYNOMIAL_STEPS = 10**9
"""Recurrence steps a polynomial call may take (elements times degree): about 10 s of one core."""


def _polynomial(args: Args) -> str | None:
    x, n = args.get("x"), args.get("n")
    if n is None:
        return None
    if is_tensor(n):
        degree = float(n.double().abs().max()) if n.numel() else 0.0
        shape = shape_of(n) if not is_tensor(x) else tuple(_broadcast(shape_of(x), shape_of(n)))
    else:
        degree, shape = abs(float(n)), shape_of(x) if is_tensor(x) else ()
    if not math.isfinite(degree):
        return f"the degree n must be finite, got {degree}"
    steps = degree * math.prod(shape)
    if steps > MAX_POLYNOMIAL_STEPS:  # n = 2**40: one recurrence step per degree and element, a hang
        return f"degree {degree:.0f} over {math.prod(shape)} elements is {steps:.3g} steps, over 1e+09"
    return None


def _broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    rank = max(len(a), len(b))
    a, b = (1,) * (rank - len(a)) + a, (1,) * (rank - len(b)) + b
    return tuple(max(i, j) if min(i, j) != 0 else 0 for i, j in zip(a, b, strict=True))


CHECKS: dict[str, Builder] = {
    "embedding": static(_embedding),
    "pool_indices": _pool_indices,
    "ctc": static(_ctc),
    "segments": static(_segments),
    "polynomial": static(_polynomial),
}
"""Family -> its builder."""
