"""Recurrent kernels: weights that match hx, packed batch sizes, oneDNN's layer buffers and workspace."""

from __future__ import annotations

import functools
from typing import Any

from opwire.proxy_executor.precondition_families.common import (
    Args,
    Builder,
    Check,
    is_tensor,
    packed_batch_sizes,
    same_shape,
    shape_of,
)

__all__ = ["CHECKS"]


_GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}
_MKLDNN_GATES = {0: 1, 1: 1, 2: 4, 3: 3}  # the mode enum: RNN_RELU, RNN_TANH, LSTM, GRU


def _rnn(op: str) -> Check:
    gates = _GATES.get(op.partition(".")[0].partition("::")[2], 0)

    def check(args: Args) -> str | None:
        if "hidden_size" in args:
            return _mkldnn_rnn(args)
        return _rnn_stack(args, gates)

    return check


def _rnn_stack(args: Args, gates: int) -> str | None:
    x = args.get("input", args.get("data"))
    hx, params = args.get("hx"), args.get("params")
    if not is_tensor(x) or hx is None or params is None:
        return None
    h, c = (hx[0], hx[-1]) if isinstance(hx, (list, tuple)) else (hx, hx)
    if not (is_tensor(h) and is_tensor(c)) or h.dim() != 3 or c.dim() != 3:
        return "hx must hold 3-D (layers * directions, batch, hidden) tensors"
    layers, dirs = int(args.get("num_layers", 1)), 2 if args.get("bidirectional") else 1
    if "batch_sizes" in args:
        wrong = packed_batch_sizes(args["batch_sizes"], int(x.shape[0]) if x.dim() == 2 else -1)
        if wrong is not None or x.dim() != 2:
            return wrong or f"packed data must be 2-D, got shape {shape_of(x)}"
        batch = int(args["batch_sizes"][0])
    else:
        if x.dim() != 3:
            return f"the input must be 3-D (sequence, batch, features), got shape {shape_of(x)}"
        batch = int(x.shape[0] if args.get("batch_first") else x.shape[1])
    hidden, cell = int(h.shape[2]), int(c.shape[2])
    if shape_of(h)[:2] != (layers * dirs, batch) or shape_of(c)[:2] != (layers * dirs, batch):
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
        if shape_of(w) != want[k]:
            return f"params[{i}] must have shape {want[k]} to match hx (hidden {hidden}), got {shape_of(w)}"
    return None


def _mkldnn_rnn(args: Args) -> str | None:
    x, hidden, gates = args.get("input"), int(args["hidden_size"]), _MKLDNN_GATES.get(args.get("mode", -1), 0)
    if not is_tensor(x) or x.dim() != 3:
        return "the input must be a 3-D tensor"
    if gates == 0:
        return f"mode must be 0, 1, 2 or 3 (RNN_RELU, RNN_TANH, LSTM, GRU), got {args.get('mode')!r}"
    hx, batch = args.get("hx_"), int(x.shape[1])  # the kernel reads (sequence, batch, features), batch_first or not
    if not is_tensor(hx) or shape_of(hx) != (batch, hidden):
        got = shape_of(hx) if is_tensor(hx) else hx
        return f"hx_ must be (batch, hidden_size={hidden}) with the input's batch, got {got} for input {shape_of(x)}"
    for name in ("input", "hx_", "cx_", "cx_tmp", "output", "hy_", "cy_"):  # handed to oneDNN as raw dense buffers
        t = args.get(name)
        if is_tensor(t) and not t.is_contiguous():
            return f"{name} must be contiguous (the kernel reads its buffer as dense), got strides {t.stride()}"
    weights = [args.get(f"weight{i}") for i in (0, 1, 2, 3)] if "weight0" in args else []
    weights = weights or [args.get(f"weight{i}") for i in (1, 2, 3, 4)]
    want = [(gates * hidden, int(x.shape[2])), (gates * hidden, hidden), (gates * hidden,), (gates * hidden,)]
    for i, (w, shape) in enumerate(zip(weights, want, strict=True)):
        if is_tensor(w) and shape_of(w) != shape and not (i >= 2 and not args.get("has_biases")):
            return f"weight {i} must have shape {shape} for hidden_size {hidden}, got {shape_of(w)}"
    for name in ("cx_", "cx_tmp", "hy_", "cy_", "grad_hy", "grad_cy"):
        t = args.get(name)
        if is_tensor(t) and t.numel() != batch * hidden:
            return f"{name} must have batch * hidden_size = {batch * hidden} values, got shape {shape_of(t)}"
    out = args.get("output")
    if is_tensor(out):
        if out.numel() != x.numel() // max(int(x.shape[2]), 1) * hidden:
            return f"output must have one hidden_size row per input row, got shape {shape_of(out)}"
        wrong = same_shape(args, ("grad_output",), shape_of(out), "output")
        if wrong is not None:
            return wrong
    return _mkldnn_workspace(args, weights) if "workspace" in args else None


def _mkldnn_workspace(args: Args, weights: list[Any]) -> str | None:
    """The backward hands `workspace` to oneDNN as the forward's buffer: it must be that buffer's size."""
    ws, x, hx = args.get("workspace"), args["input"], args["hx_"]
    if not is_tensor(ws) or str(ws.dtype) != "torch.uint8" or ws.dim() != 1 or not ws.is_contiguous():
        return f"workspace must be the 1-D uint8 buffer the forward returned, got {ws if ws is None else ws.dtype}"
    key = tuple((shape_of(t), str(t.dtype)) for t in (x, hx, *(w for w in weights if is_tensor(w))))
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


def _rnn_cell(op: str) -> Check:
    """The THNN cell kernels: gates (batch, G * hidden), states (batch, hidden), biases (G * hidden,)."""
    gru = "gru" in op
    gates = 3 if gru else 4

    def check(args: Args) -> str | None:
        state = next((args.get(k) for k in ("cx", "hx", "grad_hy") if is_tensor(args.get(k))), None)
        if state is None:
            return None
        if state.dim() != 2:
            return f"the cell state must be 2-D (batch, hidden), got shape {shape_of(state)}"
        batch, hidden = shape_of(state)
        want = {
            **dict.fromkeys(("cx", "cy", "hx", "grad_hy", "grad_cy"), (batch, hidden)),
            **dict.fromkeys(("input_gates", "hidden_gates"), (batch, gates * hidden)),
            **dict.fromkeys(("input_bias", "hidden_bias"), (gates * hidden,)),
            "workspace": (batch, (5 if gru else 4) * hidden),
        }
        for name, shape in want.items():
            t = args.get(name)
            if is_tensor(t) and shape_of(t) != shape:
                return (
                    f"{name} must be {shape} for batch {batch} and hidden {hidden} ({gates} gates), got {shape_of(t)}"
                )
        return None

    return check


CHECKS: dict[str, Builder] = {"rnn": _rnn, "rnn_cell": _rnn_cell}
"""Family -> its builder."""
