"""The coverage corpus's program cases: every `torch.nn` module class, every loss and every `torch.nn.functional`
function that can be built with small inputs, found by search rather than listed from the op policy's source.

Gathered independently of the policy's derivation (STYLE habit 16): the classes and functions come from
`vars(torch.nn)` and `vars(torch.nn.functional)`, each built by trying a few constructor arguments and input
shapes until an eager call works; a table gives arguments only where no generic guess can (embeddings,
attention, recurrent nets, losses with typed targets). What cannot be built is reported, not hidden.
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["ProgramCase", "functional_cases", "loss_cases", "module_cases"]


@dataclass
class ProgramCase:
    """A module and its example inputs (None when it could not be built: `why` says so)."""

    category: str
    name: str
    module: nn.Module | None
    args: tuple[Any, ...]
    why: str = ""
    kwargs: dict[str, Any] = field(default_factory=dict)
    tolerance: tuple[float, float] = (1e-4, 1e-5)
    """(rtol, atol) against eager."""


_NOT_LAYERS = {
    "Module", "Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict", "Container", "RNNBase",
    "RNNCellBase", "DataParallel", "SyncBatchNorm", "LinearCrossEntropyLoss",
}  # fmt: skip
"""Containers and wrappers (no layer of their own); SyncBatchNorm needs a process group even in eval."""


def _r(*shape: int) -> torch.Tensor:
    return torch.randn(*shape)


def _idx(*shape: int, high: int = 5) -> torch.Tensor:
    return torch.randint(0, high, shape)


def _inputs() -> tuple[tuple[torch.Tensor, ...], ...]:
    torch.manual_seed(0)
    return (
        (_r(2, 3, 8, 8),), (_r(2, 3, 8),), (_r(2, 8),), (_r(2, 3, 4, 4, 4),), (_r(2, 4, 4, 4),), (_r(2, 6, 4, 4),),
        (_r(2, 8), _r(2, 8)), (_r(2, 3, 8), _r(2, 3, 8)),
    )  # fmt: skip


_CTOR_ARGS: tuple[tuple[Any, ...], ...] = ((), (3,), (3, 4, 3), (8, 4), (2,), (3, 4), (0.5,), (1,))

_MODULE_TABLE: dict[str, Callable[[], tuple[nn.Module, tuple[Any, ...]]]] = {
    "Embedding": lambda: (nn.Embedding(10, 4), (_idx(2, 3, high=10),)),
    "EmbeddingBag": lambda: (nn.EmbeddingBag(10, 4), (_idx(6, high=10), torch.tensor([0, 2, 2, 5]))),
    "MultiheadAttention": lambda: (nn.MultiheadAttention(8, 2, batch_first=True), (_r(2, 5, 8),) * 3),
    "Transformer": lambda: (nn.Transformer(8, 2, 1, 1, 16, batch_first=True), (_r(2, 5, 8), _r(2, 4, 8))),
    "TransformerEncoderLayer": lambda: (nn.TransformerEncoderLayer(8, 2, 16, batch_first=True), (_r(2, 5, 8),)),
    "TransformerDecoderLayer": lambda: (
        nn.TransformerDecoderLayer(8, 2, 16, batch_first=True),
        (_r(2, 4, 8), _r(2, 5, 8)),
    ),
    "TransformerEncoder": lambda: (
        nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, batch_first=True), 2, enable_nested_tensor=False),
        (_r(2, 5, 8),),
    ),
    "TransformerDecoder": lambda: (
        nn.TransformerDecoder(nn.TransformerDecoderLayer(8, 2, 16, batch_first=True), 2),
        (_r(2, 4, 8), _r(2, 5, 8)),
    ),
    "RNN": lambda: (nn.RNN(3, 4, num_layers=2, bidirectional=True), (_r(5, 2, 3),)),
    "LSTM": lambda: (nn.LSTM(3, 4, num_layers=2, batch_first=True), (_r(2, 5, 3),)),
    "GRU": lambda: (nn.GRU(3, 4), (_r(5, 2, 3),)),
    "RNNCell": lambda: (nn.RNNCell(3, 4), (_r(2, 3),)),
    "LSTMCell": lambda: (nn.LSTMCell(3, 4), (_r(2, 3),)),
    "GRUCell": lambda: (nn.GRUCell(3, 4), (_r(2, 3),)),
    "Bilinear": lambda: (nn.Bilinear(8, 8, 4), (_r(2, 8), _r(2, 8))),
    "Fold": lambda: (nn.Fold((4, 4), 2), (_r(1, 12, 9),)),
    "Unfold": lambda: (nn.Unfold(2), (_r(2, 3, 8, 8),)),
    "ChannelShuffle": lambda: (nn.ChannelShuffle(2), (_r(2, 6, 4, 4),)),
    "AdaptiveLogSoftmaxWithLoss": lambda: (nn.AdaptiveLogSoftmaxWithLoss(8, 10, [4]), (_r(4, 8), _idx(4, high=10))),
    "FractionalMaxPool2d": lambda: (nn.FractionalMaxPool2d(2, output_size=3), (_r(2, 3, 8, 8),)),
    "FractionalMaxPool3d": lambda: (nn.FractionalMaxPool3d(2, output_size=2), (_r(2, 3, 4, 4, 4),)),
    "MaxUnpool1d": lambda: (_Unpool(1), (_r(2, 3, 8),)),
    "MaxUnpool2d": lambda: (_Unpool(2), (_r(2, 3, 8, 8),)),
    "MaxUnpool3d": lambda: (_Unpool(3), (_r(2, 3, 4, 4, 4),)),
    "Unflatten": lambda: (nn.Unflatten(1, (2, 4)), (_r(2, 8),)),
    "Upsample": lambda: (nn.Upsample(scale_factor=2, mode="bilinear"), (_r(2, 3, 4, 4),)),
    "LocalResponseNorm": lambda: (nn.LocalResponseNorm(2), (_r(2, 3, 8, 8),)),
    "CrossMapLRN2d": lambda: (nn.CrossMapLRN2d(3), (_r(2, 3, 8, 8),)),
    "GroupNorm": lambda: (nn.GroupNorm(3, 6), (_r(2, 6, 4, 4),)),
    "LayerNorm": lambda: (nn.LayerNorm(8), (_r(2, 3, 8),)),
    "RMSNorm": lambda: (nn.RMSNorm(8), (_r(2, 3, 8),)),
    "Threshold": lambda: (nn.Threshold(0.1, 20.0), (_r(2, 3, 8),)),
    "PReLU": lambda: (nn.PReLU(3), (_r(2, 3, 8),)),
}


class _Unpool(nn.Module):
    """max_pool with indices, then max_unpool (the only way to get the indices MaxUnpool needs)."""

    def __init__(self, dims: int) -> None:
        super().__init__()
        self.pool = getattr(nn, f"MaxPool{dims}d")(2, return_indices=True)
        self.unpool = getattr(nn, f"MaxUnpool{dims}d")(2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.unpool(*self.pool(x))


def _works(mod: nn.Module, args: tuple[Any, ...]) -> bool:
    try:
        mod.eval()
        with torch.no_grad():
            mod(*args)
        return True
    except Exception:
        return False


def _search(cls: type[nn.Module]) -> tuple[nn.Module, tuple[Any, ...]] | None:
    for ctor, args in itertools.product(_CTOR_ARGS, _inputs()):
        try:
            mod = cls(*ctor)
        except Exception:
            continue
        if _works(mod, args):
            return mod, args
    return None


def module_cases(only: Collection[str] | None = None) -> Iterator[ProgramCase]:
    """Every public nn.Module class of torch.nn that is a layer (losses apart), built by table or search."""
    for name, cls in sorted(vars(nn).items()):
        if only is not None and name not in only:
            continue
        if not inspect.isclass(cls) or not issubclass(cls, nn.Module) or name.startswith("_"):
            continue
        if name in _NOT_LAYERS or name.endswith("Loss") or name == "NLLLoss2d":
            continue
        torch.manual_seed(0)
        built = _MODULE_TABLE[name]() if name in _MODULE_TABLE else _search(cls)
        if built is None:
            yield ProgramCase("nn modules", name, None, (), "no constructor and input tried worked")
        else:
            yield ProgramCase("nn modules", name, built[0], built[1])


class _Call(nn.Module):
    """A function as a module: forward(*tensors) = fn(*args, **kwargs), the tensors in their places in `args`."""

    def __init__(self, fn: Callable[..., Any], kwargs: dict[str, Any], args: tuple[Any, ...] = ()) -> None:
        super().__init__()
        self.fn, self.kwargs = fn, kwargs
        self.template = [None if isinstance(a, torch.Tensor) else a for a in args]

    def forward(self, *tensors: Any) -> Any:
        it = iter(tensors)
        args = [next(it) if a is None else a for a in self.template]
        return self.fn(*args, *it, **self.kwargs)


def _case(category: str, name: str, fn: Callable[..., Any], args: tuple[Any, ...], kw: dict[str, Any]) -> ProgramCase:
    tensors = tuple(a for a in args if isinstance(a, torch.Tensor))
    return ProgramCase(category, name, _Call(fn, kw, args), tensors)


def _prob(*shape: int) -> torch.Tensor:
    return torch.rand(*shape) * 0.8 + 0.1


def _signs(*shape: int) -> torch.Tensor:
    return torch.randint(0, 2, shape).float() * 2 - 1


_LOSSES: dict[str, Callable[[], tuple[tuple[Any, ...], dict[str, Any]]]] = {
    "cross_entropy": lambda: ((_r(4, 5), _idx(4)), {}),
    "nll_loss": lambda: ((F.log_softmax(_r(4, 5), 1), _idx(4)), {}),
    "multi_margin_loss": lambda: ((_r(4, 5), _idx(4)), {}),
    "binary_cross_entropy": lambda: ((_prob(4, 5), _prob(4, 5)), {}),
    "binary_cross_entropy_with_logits": lambda: ((_r(4, 5), _prob(4, 5)), {}),
    "kl_div": lambda: ((F.log_softmax(_r(4, 5), 1), F.softmax(_r(4, 5), 1)), {"reduction": "batchmean"}),
    "soft_margin_loss": lambda: ((_r(4, 5), _signs(4, 5)), {}),
    "hinge_embedding_loss": lambda: ((_r(4, 5), _signs(4, 5)), {}),
    "multilabel_soft_margin_loss": lambda: ((_r(4, 5), _idx(4, 5, high=2).float()), {}),
    "multilabel_margin_loss": lambda: ((_r(4, 5), torch.tensor([[3, 0, -1, 1, 2]] * 4)), {}),
    "poisson_nll_loss": lambda: ((_r(4, 5), _prob(4, 5) * 3), {}),
    "gaussian_nll_loss": lambda: ((_r(4, 5), _r(4, 5), _prob(4, 5)), {}),
    "cosine_embedding_loss": lambda: ((_r(4, 5), _r(4, 5), _signs(4)), {}),
    "margin_ranking_loss": lambda: ((_r(4), _r(4), _signs(4)), {}),
    "triplet_margin_loss": lambda: ((_r(4, 5), _r(4, 5), _r(4, 5)), {}),
    "triplet_margin_with_distance_loss": lambda: ((_r(4, 5), _r(4, 5), _r(4, 5)), {}),
    "ctc_loss": lambda: (
        (
            F.log_softmax(_r(12, 2, 5), 2),
            torch.tensor([[1, 2, 3], [2, 4, 1]]),
            torch.tensor([12, 10]),
            torch.tensor([3, 2]),
        ),
        {},
    ),
}
for _name in ("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss"):
    _LOSSES[_name] = lambda: ((_r(4, 5), _r(4, 5)), {})

_LOSS_MODULES = {
    "CrossEntropyLoss": "cross_entropy", "NLLLoss": "nll_loss", "MultiMarginLoss": "multi_margin_loss",
    "BCELoss": "binary_cross_entropy", "BCEWithLogitsLoss": "binary_cross_entropy_with_logits",
    "KLDivLoss": "kl_div", "SoftMarginLoss": "soft_margin_loss", "HingeEmbeddingLoss": "hinge_embedding_loss",
    "MultiLabelSoftMarginLoss": "multilabel_soft_margin_loss", "MultiLabelMarginLoss": "multilabel_margin_loss",
    "PoissonNLLLoss": "poisson_nll_loss", "GaussianNLLLoss": "gaussian_nll_loss",
    "CosineEmbeddingLoss": "cosine_embedding_loss", "MarginRankingLoss": "margin_ranking_loss",
    "TripletMarginLoss": "triplet_margin_loss", "TripletMarginWithDistanceLoss": "triplet_margin_with_distance_loss",
    "CTCLoss": "ctc_loss", "MSELoss": "mse_loss", "L1Loss": "l1_loss", "SmoothL1Loss": "smooth_l1_loss",
    "HuberLoss": "huber_loss",
}  # fmt: skip


def loss_cases(only: Collection[str] | None = None) -> Iterator[ProgramCase]:
    """Every loss module of torch.nn (and its functional form), with inputs and targets of the kinds it takes."""
    for name, cls in sorted(vars(nn).items()):
        if only is not None and name not in only:
            continue
        if not (inspect.isclass(cls) and name.endswith("Loss") and issubclass(cls, nn.Module)) or name.startswith("_"):
            continue
        torch.manual_seed(0)
        if name in _MODULE_TABLE:
            mod, margs = _MODULE_TABLE[name]()
            yield ProgramCase("losses", name, mod, margs)
            continue
        fn = _LOSS_MODULES.get(name)
        if fn is None:
            yield ProgramCase("losses", name, None, (), "no inputs known for this loss")
            continue
        args, kw = _LOSSES[fn]()
        yield ProgramCase("losses", name, cls(**kw), args)
        yield _case("losses", f"F.{fn}", getattr(F, fn), args, kw)


_FUNCTIONAL_KW: tuple[dict[str, Any], ...] = (
    {}, {"dim": 1}, {"kernel_size": 2}, {"output_size": 2}, {"scale_factor": 2.0}, {"pad": (1, 1)},
    {"normalized_shape": (8,)}, {"num_groups": 3}, {"upscale_factor": 2}, {"downscale_factor": 2},
    {"groups": 3}, {"threshold": 0.1, "value": 0.0}, {"kernel_size": 2, "output_size": 3}, {"size": 2},
)  # fmt: skip

_FUNCTIONAL_TABLE: dict[str, Callable[[], tuple[tuple[Any, ...], dict[str, Any]]]] = {
    "conv1d": lambda: ((_r(2, 3, 8), _r(4, 3, 3)), {}),
    "conv2d": lambda: ((_r(2, 3, 8, 8), _r(4, 3, 3, 3)), {"padding": 1}),
    "conv3d": lambda: ((_r(2, 3, 4, 4, 4), _r(4, 3, 3, 3, 3)), {}),
    "conv_transpose1d": lambda: ((_r(2, 3, 8), _r(3, 4, 3)), {"stride": 2}),
    "conv_transpose2d": lambda: ((_r(2, 3, 8, 8), _r(3, 4, 3, 3)), {"stride": 2}),
    "conv_transpose3d": lambda: ((_r(2, 3, 4, 4, 4), _r(3, 4, 3, 3, 3)), {}),
    "conv_tbc": lambda: ((_r(8, 2, 3), _r(3, 3, 4), _r(4)), {}),
    "linear": lambda: ((_r(2, 8), _r(4, 8), _r(4)), {}),
    "bilinear": lambda: ((_r(2, 8), _r(2, 8), _r(4, 8, 8)), {}),
    "embedding": lambda: ((_idx(2, 3, high=10), _r(10, 4)), {}),
    "embedding_bag": lambda: ((_idx(6, high=10), _r(10, 4), torch.tensor([0, 2, 2, 5])), {"mode": "max"}),
    "batch_norm": lambda: ((_r(2, 3, 8), torch.zeros(3), torch.ones(3), _r(3), _r(3)), {}),
    "instance_norm": lambda: ((_r(2, 3, 8),), {"use_input_stats": True}),
    "group_norm": lambda: ((_r(2, 6, 4), 3, _r(6), _r(6)), {}),
    "layer_norm": lambda: ((_r(2, 3, 8), (8,), _r(8), _r(8)), {}),
    "rms_norm": lambda: ((_r(2, 3, 8), (8,), _r(8)), {}),
    "prelu": lambda: ((_r(2, 3, 8), _r(3)), {}),
    "one_hot": lambda: ((_idx(6),), {"num_classes": 5}),
    "grid_sample": lambda: ((_r(2, 3, 8, 8), torch.rand(2, 4, 4, 2) * 2 - 1), {"align_corners": False}),
    "affine_grid": lambda: ((_r(2, 2, 3), [2, 3, 4, 4]), {"align_corners": False}),
    "scaled_dot_product_attention": lambda: ((_r(2, 2, 5, 8), _r(2, 2, 5, 8), _r(2, 2, 5, 8)), {"is_causal": True}),
    "interpolate": lambda: ((_r(2, 3, 4, 4),), {"scale_factor": 2.0, "mode": "bicubic", "antialias": True}),
    "fold": lambda: ((_r(1, 12, 9),), {"output_size": (4, 4), "kernel_size": 2}),
    "cosine_similarity": lambda: ((_r(2, 8), _r(2, 8)), {}),
    "pairwise_distance": lambda: ((_r(2, 8), _r(2, 8)), {}),
    "pdist": lambda: ((_r(4, 8),), {}),
    "max_unpool1d": lambda: (F.max_pool1d(_r(2, 3, 8), 2, return_indices=True), {"kernel_size": 2}),
    "max_unpool2d": lambda: (F.max_pool2d(_r(2, 3, 8, 8), 2, return_indices=True), {"kernel_size": 2}),
    "max_unpool3d": lambda: (F.max_pool3d(_r(2, 3, 4, 4, 4), 2, return_indices=True), {"kernel_size": 2}),
    "lp_pool1d": lambda: ((_r(2, 3, 8), 2.0, 2), {}),
    "lp_pool2d": lambda: ((_r(2, 3, 8, 8), 2.0, 2), {}),
    "lp_pool3d": lambda: ((_r(2, 3, 4, 4, 4), 2.0, 2), {}),
    "local_response_norm": lambda: ((_r(2, 3, 8, 8), 2), {}),
    "glu": lambda: ((_r(2, 8),), {}),
    "normalize": lambda: ((_r(2, 8),), {}),
}
_SKIP_FUNCTIONAL = {
    "assert_int_or_pair", "multi_head_attention_forward", "grouped_mm", "scaled_grouped_mm", "scaled_mm",
    "linear_cross_entropy", "gumbel_softmax", "native_channel_shuffle", "upsample", "upsample_bilinear",
    "upsample_nearest", "rrelu", "rrelu_", "dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout",
    "feature_alpha_dropout", "fractional_max_pool2d_with_indices", "fractional_max_pool3d_with_indices",
    "fractional_max_pool2d", "fractional_max_pool3d",
}  # fmt: skip
"""Random (dropout, gumbel, fractional pooling: their modules are cases), deprecated aliases, CUDA-only
(grouped/scaled mm), helpers and the attention forward the MultiheadAttention case already runs."""


def _functional_search(fn: Callable[..., Any]) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
    for kw, args in itertools.product(_FUNCTIONAL_KW, _inputs()):
        if _works(_Call(fn, kw), args):
            return args, kw
    return None


def functional_cases(only: Collection[str] | None = None) -> Iterator[ProgramCase]:
    """Every public function of torch.nn.functional (losses apart), built by table or search."""
    for name, fn in sorted(vars(F).items()):
        if only is not None and f"F.{name}" not in only:
            continue
        if name.startswith("_") or not callable(fn) or inspect.isclass(fn) or inspect.ismodule(fn):
            continue
        if name in _SKIP_FUNCTIONAL or name in _LOSSES or name.endswith("_"):
            continue
        if getattr(fn, "__module__", None) not in ("torch.nn.functional", "torch._C._nn", "torch", None):
            continue
        torch.manual_seed(0)
        built = _FUNCTIONAL_TABLE[name]() if name in _FUNCTIONAL_TABLE else _functional_search(fn)
        if built is None:
            yield ProgramCase("functional", f"F.{name}", None, (), "no input tried worked")
        else:
            yield _case("functional", f"F.{name}", fn, built[0], built[1])
