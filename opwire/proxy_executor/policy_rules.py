"""The reviewed rules that place every ATen op in one class of the op policy (read by `opset_source`).

The generator applies them in order to every overload torch registers in the `aten` namespace:

1. `exec_policy.classify` refuses what reaches outside the tensors (files, processes, output streams,
   unchecked sparse constructors, unreviewed `unsafe` ops);
2. `REFUSED` (this table): storage-level changes, raw reinterpretation, process-wide state, test-only and
   backend-private kernels, each with its reason;
3. `FAMILIES`: kernels that trust indices, offsets or companion tensors, admitted with the family's
   precondition (`opwire.proxy_executor.preconditions`), checked before the kernel runs; every family also
   needs strided tensors with data (no sparse, oneDNN or meta tensor; `sparse_conversion` takes sparse ones)
   and written tensors that are dense buffers sharing no memory with the other arguments;
4. a public op (no leading underscore) is admitted: ATen's public ops are written for Python callers
   and validate their own arguments;
5. a private op is admitted when torch's own tables show that its public API puts it into programs and
   recordings: tagged `core`, or named by autograd's `derivatives.yaml` (a forward with a formula, or an
   op a formula calls), or reviewed in `INTERNAL` (optimizer, autocast, assertion and export helpers);
   every other private op is refused as an internal kernel.
"""

from __future__ import annotations

import re

__all__ = ["FAMILIES", "INTERNAL", "REFUSED", "family_of", "internal_reason", "refused_reason"]

_STORAGE = "storage", "changes a tensor's storage itself (resizes or swaps it); exported programs never do"
_REINTERPRET = "reinterpret", "reinterprets raw memory with caller-chosen metadata the kernel does not check"
_PROCESS = "process", "changes process-wide state (backend caches, plans, streams)"
_TEST = "internal", "is a test-only kernel of torch's own suite"

REFUSED: dict[str, tuple[str, str]] = {
    "set_": _STORAGE,
    "set": _STORAGE,
    "set_data": _STORAGE,
    "resize_": _STORAGE,
    "resize": _STORAGE,
    "resize_as_sparse_": _STORAGE,
    "resize_as_sparse": _STORAGE,
    "sparse_resize_": _STORAGE,
    "sparse_resize": _STORAGE,
    "sparse_resize_and_clear_": _STORAGE,
    "sparse_resize_and_clear": _STORAGE,
    "_resize_output_": _STORAGE,
    "_resize_output": _STORAGE,
    "_copy_from_and_resize": _STORAGE,
    "_coalesced_": ("reinterpret", "marks a sparse tensor coalesced without checking that it is"),
    "_reshape_alias": ("reinterpret", "is an internal as_strided with caller-chosen strides that export never emits"),
    "to_mkldnn": (
        "layout",
        "makes an opaque oneDNN tensor, which ATen kernels outside oneDNN's crash on (index_add_, index_copy_, "
        "cummaxmin_backward: SIGSEGV); a layout=_mkldnn argument is a BindError whatever the op (convert.enum_value)",
    ),
    "_make_per_tensor_quantized_tensor": _REINTERPRET,
    "_make_per_channel_quantized_tensor": _REINTERPRET,
    "_cufft_set_plan_cache_max_size": _PROCESS,
    "_cufft_clear_plan_cache": _PROCESS,
    "record_stream": _PROCESS,
    "_propagate_xla_data": _PROCESS,
    "_backward": ("process", "runs autograd's engine on a graph the file does not carry"),
    "_nnpack_spatial_convolution": (
        "internal",
        "is NNPACK's convolution kernel, which trusts its arguments (the per-op fuzz crashed it); programs and "
        "recordings hold convolution",
    ),
    "_slow_conv2d_backward": (
        "internal",
        "is the slow convolution path's backward kernel, which trusts its arguments (the per-op fuzz crashed it); "
        "recordings hold convolution_backward",
    ),
    **{
        name: (
            "sparse",
            "returns a view of a sparse tensor's index components: a write through it breaks the "
            "invariants later sparse kernels trust (use the _copy variant)",
        )
        for name in (
            "_indices",
            "_values",
            "indices",
            "values",
            "crow_indices",
            "col_indices",
            "ccol_indices",
            "row_indices",
        )
    },
}
"""Op name (every overload) -> (category, reason): refused whatever the other rules say."""

_REFUSED_PATTERNS: tuple[tuple[re.Pattern[str], tuple[str, str]], ...] = (
    (re.compile(r"^_test_|^_foobar$"), _TEST),
    (
        re.compile(r"^_nested_|^_jagged_|^_padded_dense_to_jagged"),
        ("internal", "builds a nested tensor from caller-supplied offsets or strides"),
    ),
)

FAMILIES: dict[str, tuple[str, re.Pattern[str]]] = {
    "batch_norm": (
        "per-channel companions (weight, bias, running and saved stats) have numel C; stats present where the "
        "mode reads them; grad_out has the input's shape",
        re.compile(
            r"^(native_batch_norm(_backward)?|_native_batch_norm_legit(_functional|_no_training)?|batch_norm"
            r"|batch_norm_backward|_batch_norm_(with_update(_functional)?|no_update|impl_index(_backward)?)"
            r"|cudnn_batch_norm(_backward)?|miopen_batch_norm(_backward)?|batch_norm_elemt"
            r"|batch_norm_backward_(elemt|reduce)|batch_norm_update_stats)$"
        ),
    ),
    "layer_norm": (
        "normalized_shape is the input's trailing shape; weight and bias have its numel; per-row stats "
        "(mean, rstd) have one value per row; grad_out has the input's shape",
        re.compile(r"^(native_layer_norm(_backward)?|_fused_rms_norm(_backward)?)$"),
    ),
    "group_norm": (
        "N*C*HxW is the input's numel and groups divide C; weight and bias have numel C; mean and rstd have "
        "numel N*groups; grad_out has the input's shape",
        re.compile(r"^native_group_norm(_backward)?$"),
    ),
    "rnn": (
        "RNN weights match hx: every layer's weights have the gate rows of the hidden size hx gives and the "
        "columns of that layer's input; hx matches the batch; packed batch_sizes are positive, non-increasing "
        "and sum to the rows; the oneDNN layer's buffers (input, hx_, cx_, output, hy_, cy_) are contiguous and "
        "its backward's workspace is the uint8 buffer of the size the forward's primitive uses",
        re.compile(r"^(lstm|gru|rnn_tanh|rnn_relu|mkldnn_rnn_layer(_backward)?)$"),
    ),
    "embedding": (
        "indices are within the table's rows; offsets are non-decreasing and within the input; bag companions "
        "(offset2bag, bag_size, per-sample weights) have the sizes of the indices and bags",
        re.compile(
            r"^(_?embedding_bag(_forward_only|_backward|_dense_backward|_sparse_backward"
            r"|_per_sample_weights_backward)?|embedding_dense_backward|embedding_backward|embedding_sparse_backward"
            r"|embedding_renorm_?)$"
        ),
    ),
    "pool_indices": (
        "indices are within the plane they index, have grad_output's (or the input's) shape and are contiguous "
        "(or channels-last), as the forward made them",
        re.compile(
            r"^(max_pool[23]d_with_indices_backward|adaptive_max_pool[23]d_backward"
            r"|fractional_max_pool[23]d_backward|max_unpool[23]d)$"
        ),
    ),
    "attention_backward": (
        "grad_out and out have the query's batch, heads and length with the value's width; logsumexp is "
        "(batch, heads, length)",
        re.compile(r"^_scaled_dot_product_(flash_attention_for_cpu|efficient_attention|flash_attention)_backward$"),
    ),
    "as_strided": (
        "the view (size, stride, storage_offset) lies within the input's storage",
        re.compile(r"^as_strided(_|_copy|_scatter)?$"),
    ),
    "pad_backward": (
        "grad_output is the input padded by the padding (same leading dimensions); reflection pads are shorter "
        "than the dimension they reflect",
        re.compile(r"^(reflection|replication)_pad[123]d_backward$"),
    ),
    "ctc": (
        "input and target lengths have one value per batch item, within the time steps and the targets; target "
        "classes within the classes and not the blank; backward companions (grad, neg_log_likelihood, log_alpha) "
        "sized to the batch",
        re.compile(r"^(_ctc_loss(_backward)?|ctc_loss)$"),
    ),
    "resize_as": (
        "the resized tensor is no view (it starts its own storage), so no other tensor sees the storage change "
        "(nn.CrossMapLRN2d's resize_as_ of a fresh output runs)",
        re.compile(r"^resize_as_?$"),
    ),
    "fft": (
        "every dim is within the input's rank; normalization is 0, 1 or 2",
        re.compile(r"^_fft_(r2c|c2r|c2c)$"),
    ),
    "fused_optimizer": (
        "every state list has one tensor per parameter, of the parameter's shape; steps are one-element tensors",
        re.compile(r"^_fused_(adam|adamw|sgd|adagrad)_?$"),
    ),
    "segments": (
        "lengths are non-negative and sum to the reduced dimension; offsets are non-decreasing and within it; "
        "packed batch_sizes are positive, non-increasing and sum to the rows",
        re.compile(r"^(_segment_reduce_backward|_pack_padded_sequence_backward|_pad_packed_sequence)$"),
    ),
    "conv_double_backward": (
        "self, weight and gO share one rank; gO has self's batch and the weight's output channels; ggI has "
        "self's shape, ggW the weight's and ggb one value per output channel (a 0-d gO was a SIGSEGV)",
        re.compile(r"^_convolution_double_backward$"),
    ),
    "rnn_cell": (
        "the THNN cell kernels' gates are (batch, G * hidden), their states (batch, hidden) and biases "
        "(G * hidden,), with G 4 for LSTM and 3 for GRU (any other shape was a SIGSEGV)",
        re.compile(r"^_thnn_(differentiable|fused)_(lstm|gru)_cell(_backward)?$"),
    ),
    "weight_norm": (
        "dim is within v's rank (or -1); g and the saved norms have one value per slice of v along dim; grad_w "
        "has v's shape (a 4096-element v against its g aborted)",
        re.compile(r"^_weight_norm(_interface(_backward)?|_differentiable_backward)?$"),
    ),
    "linalg": (
        "the rules every family shares: strided tensors with data, and an out= tensor that is a dense buffer "
        "sharing no memory with the input (linalg_eigvalsh.out into its own input corrupted the heap)",
        re.compile(r"^_?linalg_"),
    ),
    "polynomial": (
        "the degree n is finite and the call takes at most 10^9 recurrence steps (elements times degree): the "
        "special polynomial kernels step once per degree and element (n = 2**40 hung)",
        re.compile(r"^special_(shifted_)?(chebyshev|hermite|laguerre|legendre)_polynomial_[a-z]+$"),
    ),
    "dense_out": (
        "an out= tensor is a dense buffer sharing no memory with the inputs (these kernels write their output "
        "as one: _log_softmax_backward_data.out, log_sigmoid_forward.output and replication_pad2d.out into a "
        "zero-stride or overlapping out wrote past its storage, and adaptive_avg_pool3d_backward.grad_input "
        "into a zero-stride grad_input); the functional overloads have nothing to check",
        re.compile(
            r"^_(log_)?softmax(_backward_data)?$|^_masked_softmax(_backward)?$|^log_sigmoid_forward$"
            r"|^(reflection|replication)_pad[123]d$|^_?adaptive_avg_pool3d_backward$"
        ),
    ),
    "strided_only": (
        "the rules every family shares: strided tensors with data (the functional copy of a sparse CSR or CSC "
        "self is a SIGSEGV whatever src is; the memory estimate's error hid it until it estimated sparse inputs)",
        re.compile(r"^copy$"),
    ),
    "foreach": (
        "the tensor lists have one length and hold strided tensors with data (the functional _foreach_copy "
        "clones a oneDNN or sparse CSR tensor into a SIGSEGV)",
        re.compile(r"^_foreach_"),
    ),
    "sparse_conversion": (
        "a conversion to a compressed sparse layout (CSR, CSC, BSR, BSC) makes no dense dimensions: dense_dim is "
        "None or 0 and a sparse input has none (torch's kernels crash on hybrid compressed tensors: add.Tensor "
        "of a strided tensor and a CSR tensor with a dense dimension is a SIGSEGV); its tensors are the only "
        "family tensors that may be sparse",
        re.compile(r"^_?to_sparse(_csr|_csc|_bsr|_bsc)?$"),
    ),
}
"""Family -> (its precondition in words, the op names it covers). Each name is a kernel that trusts arguments."""

INTERNAL: dict[str, str] = {
    r"^_amp_(foreach_non_finite_check_and_unscale|update_scale)_?$": "GradScaler's unscale and scale update",
    r"^_autocast_to_(reduced|full)_precision$": "autocast's casts",
    r"^_cast_": "dtype casts",
    r"^_(functional_)?assert_": "export's runtime assertions",
    r"^_functional_sym_constrain_range(_for_size)?$": "export's range assertions",
    r"^_local_scalar_dense$": "Tensor.item()",
    r"^_make_dep_token$": "export's effect tokens",
    r"^_chunk_cat$": "FSDP2's gradient reduce-scatter copy-in",
    r"^_(add_relu_?|addmm_activation|aminmax|int_mm|logcumsumexp|pad_circular|pad_enum|shape_as_tensor|stack)$": (
        "a public function's kernel (validates its arguments like the public op)"
    ),
    r"^_(conj|neg_view|fw_primal|indices|values)_copy$": "a view op's copy variant",
    r"^_(convolution_mode|dim_arange|to_cpu|version|is_zerotensor|nnz|dimI|dimV|has_same_storage_numel)$": (
        "a shape or metadata query, or a public function's kernel"
    ),
    r"^_(transformer_encoder_layer_fwd|native_multi_head_attention|transform_bias_rescale_qkv)$": (
        "nn.TransformerEncoderLayer's and nn.MultiheadAttention's inference fast path (shapes checked by the "
        "composite ops it runs)"
    ),
    r"^_scaled_dot_product_attention_math$": "scaled_dot_product_attention's reference kernel",
    r"^_fused_sdp_choice$": "scaled_dot_product_attention's backend choice (a pure query)",
    r"^_masked_scale$": "dropout's mask scaling",
    r"^_index_put_impl_?$": "index_put_'s kernel (bounds-checked; unsafe=True is refused as a value)",
    r"^_(debug_has_internal_overlap|has_compatible_shallow_copy_type)$": "a metadata query",
    r"^_safe_softmax$": "softmax that export emits for attention masks (nn.MultiheadAttention)",
    r"^_linalg_(check_errors|eigvals)$": "torch.linalg's error check and eigvals (what linalg ops decompose into)",
    r"^_lu_with_info$": "torch.lu's kernel",
    r"^_(sample_dirichlet|dirichlet_grad)$": "torch.distributions.Dirichlet's sampler and its gradient",
    r"^_histogramdd_(bin_edges|from_bin_cts|from_bin_tensors)$": "torch.histogramdd's kernels (inputs checked)",
}
"""Private op pattern -> why it is admitted although autograd's tables do not name it (the review)."""

_INTERNAL = tuple((re.compile(p), why) for p, why in INTERNAL.items())


def refused_reason(name: str) -> tuple[str, str] | None:
    """(category, reason) when op name `name` (no namespace, no overload) is refused by review, else None."""
    if name in REFUSED:
        return REFUSED[name]
    for pattern, why in _REFUSED_PATTERNS:
        if pattern.search(name):
            return why
    return None


def family_of(name: str) -> str | None:
    """The precondition family of op name `name` (no namespace, no overload), or None."""
    for family, (_, pattern) in FAMILIES.items():
        if pattern.match(name):
            return family
    return None


def internal_reason(name: str) -> str | None:
    """Why private op `name` is admitted by review, or None."""
    for pattern, why in _INTERNAL:
        if pattern.search(name):
            return why
    return None
