"""One checked precondition per family of kernels that trust their indices, offsets or companion tensors.

Each check reads the call's arguments by name (`args`, a mapping of the schema's argument names to
values) and returns what is wrong, or None. `policy_rules.FAMILIES` says which ops each family covers;
every check is cheap next to its kernel (shapes, and one min/max pass over index tensors).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["CHECKS", "Args"]


class Args(dict[str, Any]):
    """A call's arguments by name; `get` of a missing or None argument is None."""

    def get(self, key: str, default: Any = None) -> Any:
        """The argument `key`, or `default` when the call has none."""
        return super().get(key, default)


def _is_tensor(v: Any) -> bool:
    import torch

    return isinstance(v, torch.Tensor)


def _shape(t: Any) -> tuple[int, ...]:
    return tuple(int(s) for s in t.shape)


def _range(t: Any, lo: int, hi: int, what: str) -> str | None:
    """`what` holds integer values in [lo, hi)."""
    if t.numel() == 0:
        return None
    if t.is_floating_point() or t.is_complex() or t.dtype.is_floating_point:
        return f"{what} must hold integers, got {t.dtype}"
    least, most = int(t.min()), int(t.max())
    if least < lo or most >= hi:
        return f"{what} must lie in [{lo}, {hi}), got values from {least} to {most}"
    return None


def _non_decreasing(t: Any, what: str) -> str | None:
    if t.dim() != 1:
        return f"{what} must be 1-D, got shape {_shape(t)}"
    if t.numel() > 1 and bool((t[1:] < t[:-1]).any()):
        return f"{what} must be non-decreasing"
    return None


def _batch_sizes(b: Any, rows: int) -> str | None:
    """Packed-sequence batch sizes: 1-D, positive, non-increasing, summing to the packed rows."""
    if b.dim() != 1 or b.numel() == 0:
        return f"batch_sizes must be a non-empty 1-D tensor, got shape {_shape(b)}"
    if bool((b <= 0).any()) or (b.numel() > 1 and bool((b[1:] > b[:-1]).any())):
        return "batch_sizes must be positive and non-increasing"
    if int(b.sum()) != rows:
        return f"batch_sizes must sum to the {rows} packed rows, got {int(b.sum())}"
    return None


def _same_shape(args: Args, names: Sequence[str], shape: tuple[int, ...], what: str) -> str | None:
    for name in names:
        t = args.get(name)
        if _is_tensor(t) and _shape(t) != shape:
            return f"{name} must have {what}'s shape {shape}, got {_shape(t)}"
    return None


_PER_CHANNEL = (
    "weight", "bias", "running_mean", "running_var", "save_mean", "save_invstd", "save_var", "save_var_transform",
    "mean", "invstd", "sum_dy", "sum_dy_xmu",
)  # fmt: skip


def _batch_norm(args: Args) -> str | None:
    x = args.get("input")
    if not _is_tensor(x):
        return None
    if x.dim() < 2:
        return f"the input needs at least 2 dimensions (batch, channels), got {x.dim()}"
    channels = int(x.shape[1])
    training = next((args[k] for k in ("training", "train", "update") if k in args), None)
    for name in _PER_CHANNEL:
        t = args.get(name)
        unread = not training and name.startswith("save_") and t is not None and t.numel() == 0  # eval backward
        if _is_tensor(t) and (t.dim() != 1 or t.numel() != channels) and not unread:
            return f"{name} must have one value per channel ({channels}), got shape {_shape(t)}"
    wrong = _same_shape(args, ("grad_out", "grad_output"), _shape(x), "the input")
    if wrong is not None:
        return wrong
    saved = "save_mean" in args
    if saved and training:
        var = args.get("save_invstd", args.get("save_var", args.get("save_var_transform")))
        if args.get("save_mean") is None or var is None:
            return "a training-mode backward needs the saved batch statistics (save_mean and save_invstd/save_var)"
    elif training is False and (args.get("running_mean") is None or args.get("running_var") is None):
        return "training=False needs running_mean and running_var"
    return None


def _layer_norm(args: Args) -> str | None:
    x, shape = args.get("input"), args.get("normalized_shape")
    if not _is_tensor(x) or shape is None:
        return None
    shape = tuple(int(s) for s in shape)
    if len(shape) > x.dim() or _shape(x)[x.dim() - len(shape) :] != shape:
        return f"normalized_shape {shape} must be the input's trailing shape, got input shape {_shape(x)}"
    inner = math.prod(shape)
    rows = x.numel() // inner if inner else 0
    for name, want in (("weight", inner), ("bias", inner), ("mean", rows), ("rstd", rows)):
        t = args.get(name)
        if _is_tensor(t) and t.numel() != want:
            return f"{name} must have {want} values, got shape {_shape(t)}"
    return _same_shape(args, ("grad_out",), _shape(x), "the input")


def _group_norm(args: Args) -> str | None:
    x = args.get("input")
    n, c, hw, groups = (args.get(k) for k in ("N", "C", "HxW", "group"))
    if not _is_tensor(x) or None in (n, c, hw, groups):
        return None
    if x.dim() < 2 or int(x.shape[0]) != n or int(x.shape[1]) != c or x.numel() != n * c * hw:
        return f"N, C, HxW ({n}, {c}, {hw}) must describe the input of shape {_shape(x)}"
    if groups <= 0 or c % groups:
        return f"group {groups} must be positive and divide C ({c})"
    for name, want in (("weight", c), ("bias", c), ("mean", n * groups), ("rstd", n * groups)):
        t = args.get(name)
        if _is_tensor(t) and t.numel() != want:
            return f"{name} must have {want} values, got shape {_shape(t)}"
    return _same_shape(args, ("grad_out",), _shape(x), "the input")


_GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}
_MKLDNN_GATES = {0: 1, 1: 1, 2: 4, 3: 3}  # the mode enum: RNN_RELU, RNN_TANH, LSTM, GRU


def _rnn(op: str) -> Callable[[Args], str | None]:
    gates = _GATES.get(op.partition(".")[0].partition("::")[2], 0)

    def check(args: Args) -> str | None:
        if "hidden_size" in args:
            return _mkldnn_rnn(args)
        return _rnn_stack(args, gates)

    return check


def _rnn_stack(args: Args, gates: int) -> str | None:
    x = args.get("input", args.get("data"))
    hx, params = args.get("hx"), args.get("params")
    if not _is_tensor(x) or hx is None or params is None:
        return None
    h, c = (hx[0], hx[-1]) if isinstance(hx, (list, tuple)) else (hx, hx)
    if not (_is_tensor(h) and _is_tensor(c)) or h.dim() != 3 or c.dim() != 3:
        return "hx must hold 3-D (layers * directions, batch, hidden) tensors"
    layers, dirs = int(args.get("num_layers", 1)), 2 if args.get("bidirectional") else 1
    if "batch_sizes" in args:
        wrong = _batch_sizes(args["batch_sizes"], int(x.shape[0]) if x.dim() == 2 else -1)
        if wrong is not None or x.dim() != 2:
            return wrong or f"packed data must be 2-D, got shape {_shape(x)}"
        batch = int(args["batch_sizes"][0])
    else:
        if x.dim() != 3:
            return f"the input must be 3-D (sequence, batch, features), got shape {_shape(x)}"
        batch = int(x.shape[0] if args.get("batch_first") else x.shape[1])
    hidden, cell = int(h.shape[2]), int(c.shape[2])
    if _shape(h)[:2] != (layers * dirs, batch) or _shape(c)[:2] != (layers * dirs, batch):
        return f"hx must be ({layers * dirs}, {batch}, hidden) for {layers} layers, {dirs} directions, batch {batch}"
    per = 2 + 2 * bool(args.get("has_biases")) + (cell != hidden)
    if len(params) != layers * dirs * per:
        return f"params must hold {layers * dirs * per} tensors ({per} per layer and direction), got {len(params)}"
    rows = gates * cell
    for i, w in enumerate(params):
        layer, k = i // (dirs * per), i % per
        cols = int(x.shape[-1]) if layer == 0 else hidden * dirs
        want = [(rows, cols), (rows, hidden), (rows,), (rows,), (hidden, cell)]
        want = want[:2] + (want[2:4] if args.get("has_biases") else []) + want[4:]
        if _shape(w) != want[k]:
            return f"params[{i}] must have shape {want[k]} to match hx (hidden {hidden}), got {_shape(w)}"
    return None


def _mkldnn_rnn(args: Args) -> str | None:
    x, hidden, gates = args.get("input"), int(args["hidden_size"]), _MKLDNN_GATES.get(args.get("mode", -1), 0)
    if not _is_tensor(x) or x.dim() != 3:
        return "the input must be a 3-D tensor"
    if gates == 0:
        return f"mode must be 0, 1, 2 or 3 (RNN_RELU, RNN_TANH, LSTM, GRU), got {args.get('mode')!r}"
    hx, batch = args.get("hx_"), int(x.shape[1])  # the kernel reads (sequence, batch, features), batch_first or not
    if not _is_tensor(hx) or _shape(hx) != (batch, hidden):
        got = _shape(hx) if _is_tensor(hx) else hx
        return f"hx_ must be (batch, hidden_size={hidden}) with the input's batch, got {got} for input {_shape(x)}"
    for name in ("input", "hx_", "cx_", "cx_tmp", "output", "hy_", "cy_"):  # handed to oneDNN as raw dense buffers
        t = args.get(name)
        if _is_tensor(t) and not t.is_contiguous():
            return f"{name} must be contiguous (the kernel reads its buffer as dense), got strides {t.stride()}"
    weights = [args.get(f"weight{i}") for i in (0, 1, 2, 3)] if "weight0" in args else []
    weights = weights or [args.get(f"weight{i}") for i in (1, 2, 3, 4)]
    want = [(gates * hidden, int(x.shape[2])), (gates * hidden, hidden), (gates * hidden,), (gates * hidden,)]
    for i, (w, shape) in enumerate(zip(weights, want, strict=True)):
        if _is_tensor(w) and _shape(w) != shape and not (i >= 2 and not args.get("has_biases")):
            return f"weight {i} must have shape {shape} for hidden_size {hidden}, got {_shape(w)}"
    for name in ("cx_", "cx_tmp", "hy_", "cy_", "grad_hy", "grad_cy"):
        t = args.get(name)
        if _is_tensor(t) and t.numel() != batch * hidden:
            return f"{name} must have batch * hidden_size = {batch * hidden} values, got shape {_shape(t)}"
    out = args.get("output")
    if _is_tensor(out):
        if out.numel() != x.numel() // max(int(x.shape[2]), 1) * hidden:
            return f"output must have one hidden_size row per input row, got shape {_shape(out)}"
        wrong = _same_shape(args, ("grad_output",), _shape(out), "output")
        if wrong is not None:
            return wrong
    return _mkldnn_workspace(args, weights) if "workspace" in args else None


def _mkldnn_workspace(args: Args, weights: list[Any]) -> str | None:
    """The backward hands `workspace` to oneDNN as the forward's buffer: it must be that buffer's size."""
    ws, x, hx = args.get("workspace"), args["input"], args["hx_"]
    if not _is_tensor(ws) or str(ws.dtype) != "torch.uint8" or ws.dim() != 1 or not ws.is_contiguous():
        return f"workspace must be the 1-D uint8 buffer the forward returned, got {ws if ws is None else ws.dtype}"
    key = tuple((_shape(t), str(t.dtype)) for t in (x, hx, *(w for w in weights if _is_tensor(w))))
    try:
        flags = bool(args.get("has_biases")), bool(args.get("reverse"))
        want = _workspace_bytes(key, int(args["mode"]), int(args["hidden_size"]), *flags)
    except RuntimeError as exc:
        return f"the forward's workspace size for these shapes is unknown: {str(exc).splitlines()[0]}"
    if ws.numel() != want:
        return f"workspace must hold the {want} bytes the forward's oneDNN primitive uses, got {ws.numel()}"
    return None


@functools.lru_cache(maxsize=64)
def _workspace_bytes(
    key: tuple[tuple[tuple[int, ...], str], ...], mode: int, hidden: int, biases: bool, reverse: bool
) -> int:
    """oneDNN's workspace size, in bytes, for a layer of these shapes and dtypes: a forward on zeros says it."""
    import torch

    x, hx, *weights = (torch.zeros(shape, dtype=getattr(torch, dtype.split(".")[-1])) for shape, dtype in key)
    w = weights + [torch.zeros(0)] * (4 - len(weights))
    with torch.enable_grad():  # the forward returns its workspace only when grad mode is on
        out = torch.ops.aten.mkldnn_rnn_layer(x, *w, hx, hx, reverse, [], mode, hidden, 1, biases, False, False, True)
    return int(out[3].numel())


def _embedding(args: Args) -> str | None:
    idx = args.get("indices")
    if not _is_tensor(idx):
        return None
    w = args.get("weight", args.get("self"))
    rows = int(args["num_weights"]) if "num_weights" in args else int(w.shape[0]) if _is_tensor(w) else None
    if rows is not None:
        wrong = _range(idx, 0, rows, f"indices (rows of a {rows}-row table)")
        if wrong is not None:
            return wrong
    n = idx.numel()
    offsets = args.get("offsets")
    if _is_tensor(offsets):
        wrong = _non_decreasing(offsets, "offsets") or _range(offsets, 0, n + 1, "offsets (positions in the indices)")
        if wrong is not None:
            return wrong
    for name in ("per_sample_weights", "offset2bag"):
        t = args.get(name)
        if _is_tensor(t) and t.numel() not in (n, 0) and not (name == "offset2bag" and t.numel() == n + 1):
            return f"{name} must have one value per index ({n}), got shape {_shape(t)}"
    grad = args.get("grad", args.get("grad_output"))
    if _is_tensor(grad) and "offset2bag" not in args and "num_weights" in args and grad.dim() >= 1:
        if _shape(grad)[:-1] != _shape(idx) and grad.numel() != n * int(grad.shape[-1]):
            return f"grad must have shape indices.shape + (dim,) = {_shape(idx)} + (dim,), got {_shape(grad)}"
    if _is_tensor(grad) and "offset2bag" in args and grad.dim() == 2:
        bags = int(grad.shape[0])
        wrong = _range(args["offset2bag"], 0, max(bags, 1), f"offset2bag (bags of grad's {bags} rows)")
        if wrong is not None:
            return wrong
        bag_size = args.get("bag_size")
        if _is_tensor(bag_size) and bag_size.numel() != bags:
            return f"bag_size must have one value per bag ({bags}), got shape {_shape(bag_size)}"
        most = args.get("maximum_indices")
        if _is_tensor(most) and most.numel() and args.get("mode") == 2:
            if _shape(most) != _shape(grad):
                return f"maximum_indices must have grad's shape {_shape(grad)}, got {_shape(most)}"
            return _range(most, -1, rows if rows is not None else 0, "maximum_indices (table rows)")
    return None


def _pool_indices(op: str) -> Callable[[Args], str | None]:
    dims = 3 if "3d" in op else 2

    def check(args: Args) -> str | None:
        x, idx = args.get("self"), args.get("indices")
        if not (_is_tensor(x) and _is_tensor(idx)):
            return None
        if "output_size" in args and "grad_output" not in args:  # max_unpool: indices into the output plane
            plane = math.prod(int(s) for s in args["output_size"])
            if _shape(idx) != _shape(x):
                return f"indices must have the input's shape {_shape(x)}, got {_shape(idx)}"
        else:
            if x.dim() < dims:
                return f"the input needs at least {dims} dimensions, got {x.dim()}"
            plane = math.prod(_shape(x)[-dims:])
            grad = args.get("grad_output")
            if _is_tensor(grad) and _shape(idx) != _shape(grad):
                return f"indices must have grad_output's shape {_shape(grad)}, got {_shape(idx)}"
            if _is_tensor(grad) and (grad.dim() != x.dim() or _shape(grad)[:-dims] != _shape(x)[:-dims]):
                return f"grad_output must share the input's leading dimensions {_shape(x)[:-dims]}, got {_shape(grad)}"
        return _range(idx, 0, plane, f"indices (positions in a plane of {plane})")

    return check


def _attention_backward(args: Args) -> str | None:
    q, k, v = args.get("query"), args.get("key"), args.get("value")
    if not all(_is_tensor(t) for t in (q, k, v)):
        return None
    if not q.dim() == k.dim() == v.dim() == 4:
        return "query, key and value must be 4-D (batch, heads, length, width)"
    if int(q.shape[0]) != int(k.shape[0]) or _shape(k)[:3] != _shape(v)[:3] or int(q.shape[3]) != int(k.shape[3]):
        return f"query {_shape(q)}, key {_shape(k)} and value {_shape(v)} do not fit together"
    out_shape = (*_shape(q)[:3], int(v.shape[3]))
    wrong = _same_shape(args, ("out", "grad_out", "grad_out_"), out_shape, "the attention output")
    if wrong is not None:
        return wrong
    lse = args.get("logsumexp")
    b, h, length = _shape(q)[:3]
    if _is_tensor(lse) and (lse.dim() != 3 or _shape(lse)[:2] != (b, h) or int(lse.shape[2]) < length):
        return f"logsumexp must be ({b}, {h}, {length}), got {_shape(lse)}"
    return None


def _as_strided(args: Args) -> str | None:
    x, size, stride = args.get("self"), args.get("size"), args.get("stride")
    if not _is_tensor(x) or size is None or stride is None:
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
    if _is_tensor(src) and _shape(src) != tuple(size):
        return f"src must have the view's shape {tuple(size)}, got {_shape(src)}"
    return None


def _ints(v: Any) -> list[int] | None:
    if _is_tensor(v):
        return [int(e) for e in v.reshape(-1).tolist()] if not v.is_floating_point() else None
    return [int(e) for e in v] if isinstance(v, (list, tuple)) else None


def _ctc(args: Args) -> str | None:
    lp, targets = args.get("log_probs"), args.get("targets")
    if not (_is_tensor(lp) and _is_tensor(targets)) or lp.dim() not in (2, 3):
        return None if not _is_tensor(lp) else f"log_probs must be (time, batch, classes), got {_shape(lp)}"
    steps, classes = int(lp.shape[0]), int(lp.shape[-1])
    batch = int(lp.shape[1]) if lp.dim() == 3 else 1
    inputs, lengths = _ints(args.get("input_lengths")), _ints(args.get("target_lengths"))
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
        return f"targets must have one row per batch item ({batch}), got {_shape(targets)}"
    if any(n < 0 for n in lengths) or (max(lengths) if targets.dim() == 2 else sum(lengths)) > room:
        return f"target_lengths must be non-negative and fit the {room} targets given"
    blank = int(args.get("blank", 0) or 0)
    if not 0 <= blank < classes:
        return f"blank {blank} must lie in [0, {classes})"
    wrong = _range(targets, 0, classes, f"targets (classes of {classes})")
    if wrong is not None:
        return wrong
    grad, nll = args.get("grad"), args.get("neg_log_likelihood")
    if _is_tensor(grad) and grad.numel() not in (batch, 1):
        return f"grad must have one value per batch item ({batch}), got shape {_shape(grad)}"
    if _is_tensor(nll) and nll.numel() != batch:
        return f"neg_log_likelihood must have one value per batch item ({batch}), got shape {_shape(nll)}"
    alpha = args.get("log_alpha")
    width = 2 * (max(lengths) if lengths else 0) + 1
    if _is_tensor(alpha) and (alpha.dim() != 3 or _shape(alpha)[:2] != (batch, steps) or int(alpha.shape[2]) < width):
        return f"log_alpha must be ({batch}, {steps}, >= {width}), got {_shape(alpha)}"
    return None


def _pad_backward(op: str) -> Callable[[Args], str | None]:
    dims = int(op.partition("_pad")[2][0])
    reflect = "reflection" in op

    def check(args: Args) -> str | None:
        grad, x, pad = args.get("grad_output"), args.get("self"), args.get("padding")
        if not (_is_tensor(grad) and _is_tensor(x)) or pad is None:
            return None
        pad = [int(p) for p in pad]
        if len(pad) != 2 * dims or x.dim() < dims or grad.dim() != x.dim():
            return f"padding must have {2 * dims} values and grad_output the input's {x.dim()} dimensions"
        if _shape(grad)[:-dims] != _shape(x)[:-dims]:
            return f"grad_output must share the input's leading dimensions {_shape(x)[:-dims]}, got {_shape(grad)}"
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
    if not (_is_tensor(x) and _is_tensor(template)):
        return None
    if x._base is not None or x.storage_offset() != 0:
        return "resize_as_ resizes a view (another tensor shares the storage it changes); resize a fresh tensor"
    return None


def _fft(args: Args) -> str | None:
    x, dims, norm = args.get("self"), args.get("dim"), args.get("normalization")
    if not _is_tensor(x):
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
        if name == "self" or not isinstance(v, (list, tuple)) or not all(_is_tensor(t) for t in v):
            continue
        needed = name in _REQUIRED_LISTS or (name == "max_exp_avg_sqs" and args.get("amsgrad"))
        needed = needed or (name == "momentum_buffer_list" and args.get("momentum") and not args.get("is_first_step"))
        if len(v) != n and (needed or v):
            return f"{name} must hold one tensor per parameter ({n}), got {len(v)}"
        for i, t in enumerate(v):
            if name == "state_steps":
                if t.numel() != 1:
                    return f"state_steps[{i}] must be a one-element tensor, got shape {_shape(t)}"
            elif _shape(t) != _shape(params[i]):
                return f"{name}[{i}] must have the parameter's shape {_shape(params[i])}, got {_shape(t)}"
    for name in ("grad_scale", "found_inf", "lr"):
        t = args.get(name)
        if _is_tensor(t) and t.numel() != 1:
            return f"{name} must be a one-element tensor, got shape {_shape(t)}"
    return None


def _segments(args: Args) -> str | None:
    if "input_size" in args:  # _pack_padded_sequence_backward
        grad, size, b = args.get("grad"), args.get("input_size"), args.get("batch_sizes")
        if not (_is_tensor(grad) and _is_tensor(b)) or size is None or len(size) < 2:
            return None
        steps, batch = (size[1], size[0]) if args.get("batch_first") else (size[0], size[1])
        wrong = _batch_sizes(b, int(grad.shape[0]) if grad.dim() else -1)
        if wrong is None and (b.numel() > steps or int(b[0]) > batch):
            wrong = f"batch_sizes ({b.numel()} steps, first {int(b[0])}) must fit input_size {list(size)}"
        return wrong
    if "batch_sizes" in args:  # _pad_packed_sequence
        data, b = args.get("data"), args.get("batch_sizes")
        return _batch_sizes(b, int(data.shape[0]) if data.dim() else -1) if _is_tensor(data) else None
    data, axis = args.get("data"), int(args.get("axis", 0))
    if not _is_tensor(data) or not -data.dim() <= axis < max(data.dim(), 1):
        return None if not _is_tensor(data) else f"axis {axis} is out of range"
    extent = int(data.shape[axis])
    lengths, offsets = args.get("lengths"), args.get("offsets")
    if _is_tensor(lengths):
        if lengths.numel() and (bool((lengths < 0).any()) or int(lengths.sum(-1).max()) > extent):
            return f"lengths must be non-negative and sum to at most the reduced dimension ({extent})"
        segments = int(lengths.shape[-1]) if lengths.dim() else 1
    elif _is_tensor(offsets):
        flat = offsets.reshape(-1, offsets.shape[-1]) if offsets.dim() else offsets.reshape(1, 1)
        if any(_non_decreasing(row, "offsets") for row in flat):
            return "offsets must be non-decreasing"
        wrong = _range(offsets, 0, extent + 1, f"offsets (positions in a dimension of {extent})")
        if wrong is not None:
            return wrong
        segments = int(offsets.shape[-1]) - 1
    else:
        return None
    for name in ("grad", "output"):
        t = args.get(name)
        if _is_tensor(t) and (t.dim() != data.dim() or int(t.shape[axis]) != segments):
            return f"{name} must have {segments} segments along axis {axis}, got shape {_shape(t)}"
    return None


def _static(check: Callable[[Args], str | None]) -> Callable[[str], Callable[[Args], str | None]]:
    return lambda _op: check


CHECKS: dict[str, Callable[[str], Callable[[Args], str | None]]] = {
    "batch_norm": _static(_batch_norm),
    "layer_norm": _static(_layer_norm),
    "group_norm": _static(_group_norm),
    "rnn": _rnn,
    "embedding": _static(_embedding),
    "pool_indices": _pool_indices,
    "attention_backward": _static(_attention_backward),
    "as_strided": _static(_as_strided),
    "ctc": _static(_ctc),
    "pad_backward": _pad_backward,
    "resize_as": _static(_resize_as),
    "fft": _static(_fft),
    "fused_optimizer": _static(_fused_optimizer),
    "segments": _static(_segments),
}
"""Family -> a builder taking the op ("aten::lstm.input") and giving its check of the call's named arguments."""
