"""The models of the test corpus: seeded factories of (eager module, args, kwargs), by name.

tests/support/corpus.py exports them; see its docstring for how tests and benchmarks get the programs.
Each model is small and fast to export, and chosen for what its graph puts on the wire.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from support import corpus_ops

__all__ = ["MODELS", "Made", "ModelSpec"]

_SEED = 20240613

Made = tuple[nn.Module, tuple[Any, ...], dict[str, Any]]


@dataclass(frozen=True)
class ModelSpec:
    """How to build one model: a seeded factory of (eager module, args, kwargs) and its dynamic shapes."""

    name: str
    make: Callable[[], Made]
    dynamic_shapes: Callable[[], Any] | None = None
    doc: str = ""
    variants: Callable[[], list[tuple[tuple[Any, ...], dict[str, Any]]]] | None = None  # other valid inputs

    def inputs(self) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
        """The example inputs, then any other inputs the program must accept (e.g. other dynamic sizes)."""
        _, args, kwargs = self.fresh()
        more = self.variants() if self.variants is not None else []
        return [(args, kwargs), *more]

    def fresh(self) -> Made:
        """A new eager module and new inputs, identical on every call (seeded)."""
        torch.manual_seed(_SEED)
        return self.make()


class _MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x).softmax(dim=-1)


class _ConvBN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, kernel_size=3, stride=2, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, kernel_size=3, padding=1, groups=2)
        self.pool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.bn(self.conv(x)))
        x = F.max_pool2d(self.conv2(x), kernel_size=2)
        return self.fc(torch.flatten(self.pool(x), 1))


class _LSTM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(6, 12, num_layers=2, batch_first=True)
        self.head = nn.Linear(12, 3)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out, (h, _c) = self.lstm(x)
        return self.head(out[:, -1]), h


class _Dynamic(nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        b, n = x.shape
        z = torch.cat([x, y], dim=0).reshape(-1, 2, n // 2)
        ones = torch.ones(b, n // 2, dtype=x.dtype)
        out = z[:b].sum(dim=1) * (b * 0.5) + ones + x.new_zeros(b, n // 2)  # a SymFloat argument
        return torch.cond(b > 4, lambda t: t + 1.0, lambda t: t - 1.0, (out,))  # a SymBool predicate


class _Counter(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("calls", torch.zeros((), dtype=torch.int64))
        self.register_buffer("running", torch.zeros(4))
        self.register_buffer("total", torch.zeros(4))
        self.scale = nn.Parameter(torch.full((4,), 0.5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls.add_(1)
        self.running.mul_(0.9).add_(x.mean(dim=0) * 0.1)
        torch.ops.opwire_test.accumulate_(self.total, x.sum(dim=0))
        return x * self.scale + self.running + self.calls + self.total


class _Cond(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        def true_fn(t: torch.Tensor) -> torch.Tensor:
            return self.lin(t).sin()

        def false_fn(t: torch.Tensor) -> torch.Tensor:
            return t.cos() - 1.0

        return torch.cond(x.sum() > 0, true_fn, false_fn, (x,))


class _Pytree(nn.Module):
    def forward(
        self, inputs: dict[str, Any], pair: tuple[torch.Tensor, list[torch.Tensor]], *, bias: torch.Tensor
    ) -> dict[str, Any]:
        a, (b, c) = pair[0], pair[1]
        total = inputs["x"] + inputs["nested"][0] * inputs["nested"][1]
        return {"total": total + bias, "parts": [a - b, (c * 2.0, total.sum())]}


class _ArgKinds(nn.Module):
    def forward(self, x: torch.Tensor, idx: torch.Tensor) -> tuple[torch.Tensor, ...]:
        d = x.to(dtype=torch.float64).sum(dim=1, keepdim=True).to(torch.float32)
        z = torch.zeros(2, 3, 4, 4, dtype=torch.float32, device="cpu", layout=torch.strided)
        cl = (x + z).contiguous(memory_format=torch.channels_last)
        up = F.interpolate(cl, scale_factor=[2.0, 1.5], mode="nearest")
        q = torch.div(x, 0.7, rounding_mode="floor")
        g = F.gelu(x, approximate="tanh").clamp(min=None, max=0.8)
        picked = x[:, idx]
        e = torch.einsum("bchw,bchw->bc", x, g)
        return d, up, q + g, picked, e


class _Complex(nn.Module):
    def forward(self, z: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a = z * (1 + 2j)
        b = torch.add(a, w, alpha=0.5) - (0.25 - 1j)
        return torch.view_as_real(b), b.abs()


class _NonFinite(nn.Module):
    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        lo = x.clamp(min=float("-inf"), max=float("inf"))
        nan = torch.full((2, 3), float("nan"))
        filled = x.masked_fill(mask, float("-inf"))
        return lo, nan, filled.softmax(dim=-1).nan_to_num(nan=0.0, posinf=1e30)


class _CustomOp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(3, 4))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        ops = torch.ops.opwire_test
        a = ops.mix(x, y)  # every default left out
        b = ops.mix(x, None, 2.5, 3, flag=False, mode="max", dims=[0, 1], weights=[0.5, 0.25, 2.0])
        c = ops.mix(a + b, self.w, dtype=torch.float64, c=1.5 - 0.5j)
        (d,) = ops.tagged(x, [True, False], ["keep", "größe→ü"], [None, y])
        return c, d


def _make_mlp() -> Made:
    return _MLP(), (torch.randn(5, 8),), {}


def _make_convbn() -> Made:
    return _ConvBN().train(), (torch.randn(2, 3, 16, 16),), {}


def _make_transformer() -> Made:
    layer = nn.TransformerEncoderLayer(d_model=16, nhead=4, dim_feedforward=32, dropout=0.0, batch_first=True)
    return layer.eval(), (torch.randn(2, 5, 16),), {}


def _make_lstm() -> Made:
    return _LSTM(), (torch.randn(3, 7, 6),), {}


def _make_dynamic() -> Made:
    return _Dynamic(), (torch.randn(6, 8), torch.randn(4, 8)), {}


def _dynamic_shapes() -> Any:
    batch = torch.export.Dim("batch", min=2, max=64)
    other = torch.export.Dim("other", min=2, max=64)
    return ({0: batch}, {0: other})


def _dynamic_variants() -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    return [((torch.randn(3, 8), torch.randn(9, 8)), {}), ((torch.randn(17, 8), torch.randn(2, 8)), {})]


def _make_counter() -> Made:
    return _Counter(), (torch.randn(3, 4),), {}


def _make_cond() -> Made:
    return _Cond(), (torch.randn(3, 4),), {}


def _make_pytree() -> Made:
    inputs = {"x": torch.randn(2, 3), "nested": (torch.randn(2, 3), torch.randn(2, 3))}
    pair = (torch.randn(4), [torch.randn(4), torch.randn(5)])
    return _Pytree(), (inputs, pair), {"bias": torch.randn(3)}


def _make_argkinds() -> Made:
    return _ArgKinds(), (torch.randn(2, 3, 4, 4), torch.tensor([2, 0])), {}


def _make_complex() -> Made:
    return _Complex(), (torch.randn(3, 4, dtype=torch.complex64), torch.randn(3, 4, dtype=torch.complex64)), {}


def _make_nonfinite() -> Made:
    x = torch.randn(2, 3)
    mask = torch.tensor([[True, False, False], [False, True, False]])
    return _NonFinite(), (x, mask), {}


def _make_custom_op() -> Made:
    corpus_ops.register()
    return _CustomOp(), (torch.randn(3, 4), torch.randn(3, 4)), {}


MODELS: dict[str, ModelSpec] = {
    s.name: s
    for s in (
        ModelSpec("mlp", _make_mlp, doc="Linear/ReLU/Tanh stack with softmax"),
        ModelSpec("conv_bn", _make_convbn, doc="conv + batchnorm in train mode (running-stat buffers mutate)"),
        ModelSpec("transformer", _make_transformer, doc="nn.TransformerEncoderLayer, eval mode"),
        ModelSpec("lstm", _make_lstm, doc="two-layer LSTM with a linear head, tuple outputs"),
        ModelSpec(
            "dynamic",
            _make_dynamic,
            _dynamic_shapes,
            doc="torch.export.Dim sizes, a SymFloat argument, a cond on a SymBool",
            variants=_dynamic_variants,
        ),
        ModelSpec("counter", _make_counter, doc="buffers mutated in forward, also by a mutating custom op"),
        ModelSpec("cond", _make_cond, doc="torch.cond with a parameter used in one branch"),
        ModelSpec("pytree", _make_pytree, doc="dict/tuple/list inputs and outputs, a kwarg"),
        ModelSpec("argkinds", _make_argkinds, doc="dtype/device/layout/memory_format/str/None/float[] arguments"),
        ModelSpec("complex", _make_complex, doc="complex tensors and complex scalars"),
        ModelSpec("nonfinite", _make_nonfinite, doc="-inf/inf/nan constants"),
        ModelSpec("custom_op", _make_custom_op, doc="opwire_test custom ops with defaults of many types"),
    )
}
