"""The coverage corpus's `diffusers` cases: UNets, autoencoders, diffusion transformers and a ControlNet.

Each model is built from a tiny config (one block per level, 16-32 channels, 8-16 pixel latents) with random
weights, nothing downloaded, and called with the keyword inputs a pipeline passes it (latents, timesteps, text
embeddings, class labels). Written from diffusers' model families, independently of the op policy's derivation.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Collection, Iterator
from typing import Any

import torch

from support.coverage_nn import ProgramCase

__all__ = ["diffusers_cases"]


def _latents(channels: int = 4, size: int = 16) -> torch.Tensor:
    return torch.randn(2, channels, size, size)


def _steps() -> torch.Tensor:
    return torch.tensor([10, 500])


def _text(dim: int = 16) -> torch.Tensor:
    return torch.randn(2, 5, dim)


_UNET: dict[str, Any] = dict(
    sample_size=16, in_channels=4, out_channels=4, layers_per_block=1, block_out_channels=(16, 32),
    norm_num_groups=8,
)  # fmt: skip
_COND_UNET: dict[str, Any] = dict(
    **_UNET, down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"), up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
    cross_attention_dim=16, attention_head_dim=4,
)  # fmt: skip
_VAE: dict[str, Any] = dict(
    in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D",) * 2, up_block_types=("UpDecoderBlock2D",) * 2,
    block_out_channels=(16, 32), latent_channels=4, norm_num_groups=8, layers_per_block=1,
)  # fmt: skip

_Arch = tuple[str, dict[str, Any], Callable[[], dict[str, Any]]]
"""(model class, config arguments, keyword inputs)."""

_DIFFUSERS: dict[str, _Arch] = {
    "UNet2DModel": (
        "UNet2DModel",
        dict(**{**_UNET, "in_channels": 3, "out_channels": 3}, attention_head_dim=8,
             down_block_types=("DownBlock2D", "AttnDownBlock2D"), up_block_types=("AttnUpBlock2D", "UpBlock2D")),
        lambda: {"sample": _latents(3), "timestep": _steps()},
    ),
    "UNet2DConditionModel": (
        "UNet2DConditionModel", _COND_UNET,
        lambda: {"sample": _latents(), "timestep": _steps(), "encoder_hidden_states": _text()},
    ),
    "ControlNetModel": (
        "ControlNetModel",
        dict(in_channels=4, layers_per_block=1, block_out_channels=(16, 32), norm_num_groups=8, cross_attention_dim=16,
             attention_head_dim=4, down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
             conditioning_embedding_out_channels=(8, 16)),
        lambda: {"sample": _latents(), "timestep": _steps(), "encoder_hidden_states": _text(),
                 "controlnet_cond": torch.randn(2, 3, 32, 32)},
    ),
    "AutoencoderKL": ("AutoencoderKL", _VAE, lambda: {"sample": _latents(3)}),
    "VQModel": ("VQModel", {**_VAE, "num_vq_embeddings": 16, "vq_embed_dim": 4}, lambda: {"sample": _latents(3)}),
    "AutoencoderTiny": (
        "AutoencoderTiny",
        dict(encoder_block_out_channels=(16, 16), decoder_block_out_channels=(16, 16), num_encoder_blocks=(1, 1),
             num_decoder_blocks=(1, 1), latent_channels=4),
        lambda: {"sample": _latents(3)},
    ),
    "DiTTransformer2DModel": (
        "DiTTransformer2DModel",
        dict(num_attention_heads=2, attention_head_dim=8, in_channels=4, out_channels=4, num_layers=1, sample_size=8,
             norm_num_groups=8, num_embeds_ada_norm=10),
        lambda: {"hidden_states": _latents(4, 8), "timestep": _steps(), "class_labels": torch.tensor([1, 3])},
    ),
    "PixArtTransformer2DModel": (
        "PixArtTransformer2DModel",
        dict(num_attention_heads=2, attention_head_dim=8, in_channels=4, out_channels=8, num_layers=1, sample_size=8,
             cross_attention_dim=16, caption_channels=16, norm_num_groups=8),
        lambda: {"hidden_states": _latents(4, 8), "timestep": _steps(), "encoder_hidden_states": _text(),
                 "added_cond_kwargs": {"resolution": None, "aspect_ratio": None}},
    ),
    "SD3Transformer2DModel": (
        "SD3Transformer2DModel",
        dict(sample_size=8, patch_size=2, in_channels=4, num_layers=1, attention_head_dim=8, num_attention_heads=2,
             joint_attention_dim=16, caption_projection_dim=16, pooled_projection_dim=16, out_channels=4,
             pos_embed_max_size=16),
        lambda: {"hidden_states": _latents(4, 8), "encoder_hidden_states": _text(),
                 "pooled_projections": torch.randn(2, 16), "timestep": _steps()},
    ),
    "FluxTransformer2DModel": (
        "FluxTransformer2DModel",
        dict(patch_size=1, in_channels=16, num_layers=1, num_single_layers=1, attention_head_dim=8,
             num_attention_heads=2, joint_attention_dim=16, pooled_projection_dim=16, axes_dims_rope=(2, 2, 4)),
        lambda: {"hidden_states": torch.randn(2, 16, 16), "encoder_hidden_states": _text(),
                 "pooled_projections": torch.randn(2, 16), "timestep": torch.tensor([0.1, 0.5]),
                 "img_ids": torch.zeros(16, 3), "txt_ids": torch.zeros(5, 3)},
    ),
}  # fmt: skip


def _case(name: str, arch: _Arch) -> ProgramCase:
    cls_name, config, inputs = arch
    torch.manual_seed(0)
    try:
        model = getattr(importlib.import_module("diffusers"), cls_name)(**config)
    except Exception as exc:  # a family this diffusers does not have, or a config it rejects
        return ProgramCase("diffusers", name, None, (), f"{type(exc).__name__}: {exc}"[:160])
    return ProgramCase("diffusers", name, model, (), kwargs=inputs(), tolerance=(1e-4, 1e-4))


def diffusers_cases(only: Collection[str] | None = None) -> Iterator[ProgramCase]:
    """One case per architecture, `only` those named; nothing when diffusers is not installed."""
    try:
        importlib.import_module("diffusers")
    except ImportError:
        return
    for name, arch in _DIFFUSERS.items():
        if only is None or name in only:
            yield _case(name, arch)
