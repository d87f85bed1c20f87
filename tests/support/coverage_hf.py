"""The coverage corpus's `transformers` cases, and a recorded forward and backward of every model-library architecture.

Every model is built from a tiny config (1-2 layers, hidden sizes 16-64, a 64-token vocabulary) with random
weights: nothing is downloaded. Each case is the model and the keyword inputs a user passes it (its own names and
shapes), exported in the training IR and the core ATen IR and run by `opwire.run_program` like the other program
cases; `model_training_cases` records these and coverage_diffusers.py's models through a forward and a backward.
The list is written from the libraries' model families, independently of the op policy's derivation.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Collection, Iterator
from typing import Any

import torch
from torch.utils import _pytree as pytree

from support.coverage_diffusers import diffusers_cases
from support.coverage_nn import ProgramCase
from support.coverage_train import RecordedCase

__all__ = ["hf_cases", "model_training_cases"]

_VOCAB, _SEQ = 64, 8
_TEXT: dict[str, Any] = dict(
    vocab_size=_VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
    intermediate_size=37, max_position_embeddings=64, head_dim=8, pad_token_id=0, bos_token_id=1, eos_token_id=2,
)  # fmt: skip
_ENCODER: dict[str, Any] = dict(
    vocab_size=_VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
    max_position_embeddings=64, type_vocab_size=2, pad_token_id=0,
)  # fmt: skip
_SEQ2SEQ: dict[str, Any] = dict(
    vocab_size=_VOCAB, d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4,
    decoder_attention_heads=4, encoder_ffn_dim=37, decoder_ffn_dim=37, max_position_embeddings=64, pad_token_id=0,
    bos_token_id=1, eos_token_id=2, decoder_start_token_id=2,
)  # fmt: skip
_MOE: dict[str, Any] = dict(num_local_experts=4, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16)


def _ids(batch: int = 2, seq: int = _SEQ) -> torch.Tensor:
    return torch.randint(3, _VOCAB, (batch, seq))


def _mask(left: bool) -> torch.Tensor:
    """Two rows, the second padded by 3 tokens (on the left, as batched generation pads, or on the right)."""
    mask = torch.ones(2, _SEQ, dtype=torch.long)
    mask[1, slice(0, 3) if left else slice(_SEQ - 3, _SEQ)] = 0
    return mask


def _text() -> dict[str, Any]:
    return {"input_ids": _ids(), "attention_mask": _mask(left=False)}


def _causal() -> dict[str, Any]:
    """`model(input_ids)`: no mask, so transformers looks for packed sequences in the positions."""
    return {"input_ids": _ids(), "use_cache": False}


def _padded() -> dict[str, Any]:
    """A left-padded batch with its attention mask, as batched generation passes it."""
    return {"input_ids": _ids(), "attention_mask": _mask(left=True), "use_cache": False}


def _seq2seq() -> dict[str, Any]:
    return {**_text(), "decoder_input_ids": _ids(2, 5), "use_cache": False}


def _pixels(size: int = 32, channels: int = 3) -> Callable[[], dict[str, Any]]:
    return lambda: {"pixel_values": torch.randn(2, channels, size, size)}


_VISION: dict[str, Any] = dict(
    image_size=32, patch_size=8, num_channels=3, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
    intermediate_size=37,
)  # fmt: skip

_Arch = tuple[str, str, dict[str, Any], Callable[[], dict[str, Any]]]
"""(model class, config class, config arguments, keyword inputs)."""

_TRANSFORMERS: dict[str, _Arch] = {
    "gpt2": ("GPT2LMHeadModel", "GPT2Config", dict(n_layer=2, n_head=4, n_embd=32, vocab_size=_VOCAB, n_positions=64), _padded),
    "llama": ("LlamaForCausalLM", "LlamaConfig", _TEXT, _causal),
    "mistral": ("MistralForCausalLM", "MistralConfig", _TEXT, _padded),
    "mixtral (MoE)": ("MixtralForCausalLM", "MixtralConfig", {**_TEXT, **_MOE, "intermediate_size": 48}, _causal),
    "qwen2": ("Qwen2ForCausalLM", "Qwen2Config", _TEXT, _padded),
    "qwen2_moe": ("Qwen2MoeForCausalLM", "Qwen2MoeConfig", {**_TEXT, **_MOE, "shared_expert_intermediate_size": 16}, _padded),
    "qwen3": ("Qwen3ForCausalLM", "Qwen3Config", _TEXT, _causal),
    "qwen3_moe": ("Qwen3MoeForCausalLM", "Qwen3MoeConfig", {**_TEXT, **_MOE}, _causal),
    "gemma": ("GemmaForCausalLM", "GemmaConfig", _TEXT, _causal),
    "gemma2": ("Gemma2ForCausalLM", "Gemma2Config", _TEXT, _padded),
    "phi": ("PhiForCausalLM", "PhiConfig", _TEXT, _causal),
    "phi3": ("Phi3ForCausalLM", "Phi3Config", _TEXT, _padded),
    "falcon": ("FalconForCausalLM", "FalconConfig", {k: v for k, v in _TEXT.items() if k != "head_dim"}, _padded),
    "gpt_neox": ("GPTNeoXForCausalLM", "GPTNeoXConfig", _TEXT, _causal),
    "opt": ("OPTForCausalLM", "OPTConfig", {**_TEXT, "ffn_dim": 37, "word_embed_proj_dim": 32}, _padded),
    "bloom": ("BloomForCausalLM", "BloomConfig", {**_TEXT, "n_layer": 2, "n_head": 4}, _padded),
    "bert": ("BertForMaskedLM", "BertConfig", _ENCODER, _text),
    "roberta": ("RobertaForMaskedLM", "RobertaConfig", _ENCODER, _text),
    "distilbert": ("DistilBertForMaskedLM", "DistilBertConfig", dict(vocab_size=_VOCAB, dim=32, n_layers=2, n_heads=4, hidden_dim=37, max_position_embeddings=64), _text),
    "albert": ("AlbertForMaskedLM", "AlbertConfig", {**_ENCODER, "embedding_size": 16}, _text),
    "electra": ("ElectraForMaskedLM", "ElectraConfig", {**_ENCODER, "embedding_size": 16}, _text),
    "deberta-v2": ("DebertaV2ForMaskedLM", "DebertaV2Config", _ENCODER, _text),
    "t5": ("T5ForConditionalGeneration", "T5Config", dict(vocab_size=_VOCAB, d_model=32, d_kv=8, d_ff=37, num_layers=1, num_decoder_layers=1, num_heads=4, decoder_start_token_id=0), _seq2seq),
    "bart": ("BartForConditionalGeneration", "BartConfig", _SEQ2SEQ, _seq2seq),
    "whisper": ("WhisperForConditionalGeneration", "WhisperConfig", {**_SEQ2SEQ, "num_mel_bins": 16, "max_source_positions": 16, "max_target_positions": 16}, lambda: {"input_features": torch.randn(2, 16, 32), "decoder_input_ids": _ids(2, 5), "use_cache": False}),
    "wav2vec2": ("Wav2Vec2Model", "Wav2Vec2Config", dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37, conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2), lambda: {"input_values": torch.randn(2, 400)}),
    "vit": ("ViTForImageClassification", "ViTConfig", _VISION, _pixels()),
    "swin": ("SwinForImageClassification", "SwinConfig", dict(image_size=32, patch_size=2, embed_dim=16, depths=(1, 1), num_heads=(2, 2), window_size=4), _pixels()),
    "convnext": ("ConvNextForImageClassification", "ConvNextConfig", dict(hidden_sizes=(16, 32), depths=(1, 1), num_stages=2), _pixels()),
    "resnet": ("ResNetForImageClassification", "ResNetConfig", dict(embedding_size=16, hidden_sizes=(16, 32), depths=(1, 1), layer_type="basic"), _pixels()),
    "clip": ("CLIPModel", "CLIPConfig", dict(text_config={**_ENCODER, "eos_token_id": 2}, vision_config=_VISION, projection_dim=16), lambda: {**_text(), **_pixels()()}),
    "segformer": ("SegformerForSemanticSegmentation", "SegformerConfig", dict(num_encoder_blocks=2, depths=(1, 1), sr_ratios=(2, 1), hidden_sizes=(16, 32), num_attention_heads=(1, 2), decoder_hidden_size=32, num_labels=3), _pixels()),
    "mobilenet_v2": ("MobileNetV2ForImageClassification", "MobileNetV2Config", dict(image_size=32, depth_multiplier=0.25), _pixels()),
    "deit": ("DeiTForImageClassification", "DeiTConfig", _VISION, _pixels()),
    "dinov2": ("Dinov2Model", "Dinov2Config", _VISION, _pixels()),
    "beit": ("BeitForImageClassification", "BeitConfig", {**_VISION, "vocab_size": 64}, _pixels()),
    "gptj": ("GPTJForCausalLM", "GPTJConfig", dict(vocab_size=_VOCAB, n_embd=32, n_layer=2, n_head=4, rotary_dim=4, n_positions=64), _padded),
    "codegen": ("CodeGenForCausalLM", "CodeGenConfig", dict(vocab_size=_VOCAB, n_embd=32, n_layer=2, n_head=4, rotary_dim=4, n_positions=64, n_ctx=64), _causal),
    "stablelm": ("StableLmForCausalLM", "StableLmConfig", _TEXT, _padded),
    "olmo": ("OlmoForCausalLM", "OlmoConfig", _TEXT, _causal),
    "starcoder2": ("Starcoder2ForCausalLM", "Starcoder2Config", _TEXT, _padded),
    "granite": ("GraniteForCausalLM", "GraniteConfig", _TEXT, _causal),
    "gemma3_text": ("Gemma3ForCausalLM", "Gemma3TextConfig", _TEXT, _causal),
    "xlm-roberta": ("XLMRobertaForMaskedLM", "XLMRobertaConfig", _ENCODER, _text),
    "mpnet": ("MPNetForMaskedLM", "MPNetConfig", _ENCODER, _text),
    "modernbert": ("ModernBertForMaskedLM", "ModernBertConfig", {**_ENCODER, "global_attn_every_n_layers": 2, "local_attention": 4}, _text),
    "mbart": ("MBartForConditionalGeneration", "MBartConfig", _SEQ2SEQ, _seq2seq),
    "pegasus": ("PegasusForConditionalGeneration", "PegasusConfig", _SEQ2SEQ, _seq2seq),
    "marian": ("MarianMTModel", "MarianConfig", _SEQ2SEQ, _seq2seq),
    "hubert": ("HubertModel", "HubertConfig", dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37, conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2), lambda: {"input_values": torch.randn(2, 400)}),
    "mobilevit": ("MobileViTForImageClassification", "MobileViTConfig", dict(image_size=32, patch_size=2, hidden_sizes=(16, 16, 16), neck_hidden_sizes=(8, 8, 16, 16, 16, 16, 32), num_attention_heads=2), _pixels()),
    "regnet": ("RegNetForImageClassification", "RegNetConfig", dict(embedding_size=16, hidden_sizes=(16, 32), depths=(1, 1), groups_width=8), _pixels()),
    "levit": ("LevitForImageClassification", "LevitConfig", dict(image_size=64, hidden_sizes=(16, 32, 48), num_attention_heads=(1, 2, 3), depths=(1, 1, 1), key_dim=(8, 8, 8)), _pixels(64)),
    "efficientnet": ("EfficientNetForImageClassification", "EfficientNetConfig", dict(image_size=32, width_coefficient=0.25, depth_coefficient=0.25, hidden_dim=320), _pixels()),
}  # fmt: skip


def _transformers(name: str, arch: _Arch) -> ProgramCase:
    cls_name, config_name, config, inputs = arch
    tf = importlib.import_module("transformers")
    torch.manual_seed(0)
    try:
        cfg = getattr(tf, config_name)(**config)
        model = getattr(tf, cls_name)(cfg)
    except Exception as exc:  # a family this transformers does not have, or a config it rejects
        return ProgramCase("transformers", name, None, (), f"{type(exc).__name__}: {exc}"[:160])
    return ProgramCase("transformers", name, model, (), kwargs=inputs())


def hf_cases(only: Collection[str] | None = None) -> Iterator[ProgramCase]:
    """One case per architecture, `only` those named; nothing when transformers is not installed."""
    try:
        importlib.import_module("transformers")
    except ImportError:
        return
    for name, arch in _TRANSFORMERS.items():
        if only is None or name in only:
            yield _transformers(name, arch)


def _forward_backward(case: ProgramCase) -> Callable[[], None]:
    model = case.module
    assert model is not None

    def work() -> None:
        model.eval()  # no dropout: a replay reproduces the step
        out = model(*case.args, **case.kwargs)
        leaves = [t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor) and t.is_floating_point()]
        sum(t.float().pow(2).mean() for t in leaves).backward()  # type: ignore[union-attr]

    return work


def model_training_cases(only: Collection[str] | None = None) -> Iterator[RecordedCase]:
    """A recorded forward and backward of every architecture (its outputs' mean square as the loss)."""
    for case in (*hf_cases(only), *diffusers_cases(only)):
        category = f"{case.category} forward+backward"
        if case.module is None:
            yield RecordedCase(category, case.name, None, case.why)
        else:
            yield RecordedCase(category, case.name, _forward_backward(case))
