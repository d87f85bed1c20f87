"""Kernels that trust their companions run only after their family's precondition (issue 25's crashes).

Each hostile call below crashed (SIGSEGV) or read past a buffer in torch itself when the op policy admitted
it without a check; through opwire it is a KernelError before the kernel runs. Each runs in a forked child
(torch already loaded: no second interpreter start per case) so a regression is a failed test, not a dead
pytest. The second half feeds the checks the calls real
modules make (forward and backward), which must all pass.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from support.forked import in_fork
from torch.utils._python_dispatch import TorchDispatchMode

from opwire.proxy_executor.precondition_families import CHECKS
from opwire.proxy_executor.preconditions import family_of, precondition_for

HOSTILE: dict[str, tuple[str, str]] = {
    "native_batch_norm_backward with no saved stats (SIGSEGV)": (
        "x = torch.randn(4, 3, 5)\n"
        "run('aten::native_batch_norm_backward', grad_out=x, input=x, weight=torch.ones(3), running_mean=None,"
        " running_var=None, save_mean=None, save_invstd=None, train=True, eps=1e-5, output_mask=[True, True, True])",
        "needs the saved batch statistics",
    ),
    "native_batch_norm_backward with 1-element stats (heap read)": (
        "x = torch.randn(8, 256, 4)\n"
        "run('aten::native_batch_norm_backward', grad_out=x, input=x, weight=torch.ones(256), running_mean=None,"
        " running_var=None, save_mean=torch.zeros(1), save_invstd=torch.ones(1), train=True, eps=1e-5,"
        " output_mask=[True, True, True])",
        "save_mean must have one value per channel (256)",
    ),
    "native_layer_norm_backward with 1-element stats (heap read)": (
        "x = torch.randn(64, 512)\n"
        "run('aten::native_layer_norm_backward', grad_out=x, input=x, normalized_shape=[512], mean=torch.zeros(1),"
        " rstd=torch.ones(1), weight=torch.ones(512), bias=torch.zeros(512), output_mask=[True, True, True])",
        "mean must have 64 values",
    ),
    "lstm.input with a lying hidden size (SIGSEGV)": (
        "h = torch.zeros(1, 2, 4096)\n"
        "params = [torch.randn(32, 8), torch.randn(32, 8), torch.randn(32), torch.randn(32)]\n"
        "run('aten::lstm.input', input=torch.randn(5, 2, 8), hx=[h, h], params=params, has_biases=True,"
        " num_layers=1, dropout=0.0, train=False, bidirectional=False, batch_first=False)",
        "params[0] must have shape (16384, 8) to match hx (hidden 4096)",
    ),
    "mkldnn_rnn_layer with a lying hidden_size (SIGSEGV)": (
        "x = torch.randn(5, 2, 8)\n"
        "run('aten::mkldnn_rnn_layer', input=x, weight0=torch.randn(32, 8), weight1=torch.randn(32, 8),"
        " weight2=torch.randn(32), weight3=torch.randn(32), hx_=torch.zeros(2, 8), cx_=torch.zeros(2, 8),"
        " reverse=False, batch_sizes=[], mode=2, hidden_size=4096, num_layers=1, has_biases=True,"
        " bidirectional=False, batch_first=False, train=False)",
        "hx_ must be (batch, hidden_size=4096)",
    ),
    "mkldnn_rnn_layer with hx_'s batch taken from the sequence axis (SIGSEGV: hy_ written past its end)": (
        "run('aten::mkldnn_rnn_layer', input=torch.randn(3, 64, 6), weight0=torch.randn(20, 6),"
        " weight1=torch.randn(20, 5), weight2=torch.randn(20), weight3=torch.randn(20), hx_=torch.zeros(3, 5),"
        " cx_=torch.zeros(3, 5), reverse=False, batch_sizes=[], mode=2, hidden_size=5, num_layers=1,"
        " has_biases=True, bidirectional=False, batch_first=True, train=True)",
        "hx_ must be (batch, hidden_size=5) with the input's batch, got (3, 5) for input (3, 64, 6)",
    ),
    "mkldnn_rnn_layer_backward with a one-element workspace (SIGSEGV, heap corruption; found by companion_fuzz.py)": (
        "x, w0, w1, b = torch.randn(7, 3, 6), torch.randn(20, 6), torch.randn(20, 5), torch.randn(20)\n"
        "h = torch.zeros(3, 5)\n"
        "out, hy, cy, ws = torch.ops.aten.mkldnn_rnn_layer(x, w0, w1, b, b, h, h, False, [], 2, 5, 1, True, False,"
        " False, True)\n"
        "run('aten::mkldnn_rnn_layer_backward', input=x, weight1=w0, weight2=w1, weight3=b, weight4=b, hx_=h,"
        " cx_tmp=h, output=out, hy_=hy, cy_=cy, grad_output=torch.ones_like(out), grad_hy=None, grad_cy=None,"
        " reverse=False, mode=2, hidden_size=5, num_layers=1, has_biases=True, train=True, bidirectional=False,"
        " batch_sizes=[], batch_first=False, workspace=torch.zeros(1, dtype=torch.uint8))",
        "bytes the forward's oneDNN primitive uses, got 1",
    ),
    "SDPA backward with a short logsumexp (heap read)": (
        "q = torch.randn(2, 4, 64, 16)\n"
        "run('aten::_scaled_dot_product_flash_attention_for_cpu_backward', grad_out=q, query=q, key=q, value=q,"
        " out=q, logsumexp=torch.zeros(2, 4, 1), dropout_p=0.0, is_causal=False)",
        "logsumexp must be (2, 4, 64)",
    ),
    "_embedding_bag with decreasing offsets": (
        "run('aten::_embedding_bag', weight=torch.randn(10, 4), indices=torch.tensor([1, 2, 3, 4]),"
        " offsets=torch.tensor([0, 3, 1, 2]), scale_grad_by_freq=False, mode=0, sparse=False,"
        " per_sample_weights=None, include_last_offset=False, padding_idx=-1)",
        "offsets must be non-decreasing",
    ),
    "max_pool2d_with_indices_backward with indices past the plane (SIGSEGV)": (
        "run('aten::max_pool2d_with_indices_backward', grad_output=torch.randn(1, 1, 2, 2),"
        " self=torch.randn(1, 1, 4, 4), kernel_size=[2, 2], stride=[2, 2], padding=[0, 0], dilation=[1, 1],"
        " ceil_mode=False, indices=torch.full((1, 1, 2, 2), 10**8))",
        "indices (positions in a plane of 16) must lie in [0, 16)",
    ),
    "_ctc_loss with a target past the classes (SIGSEGV, found by companion_fuzz.py)": (
        "run('aten::_ctc_loss.Tensor', log_probs=torch.randn(12, 2, 5).log_softmax(2),"
        " targets=torch.full((2, 3), 2**40), input_lengths=torch.tensor([12, 10]),"
        " target_lengths=torch.tensor([3, 2]), blank=0, zero_infinity=False)",
        "targets (classes of 5) must lie in [0, 5)",
    ),
    "_ctc_loss_backward with one-element lengths (SIGSEGV, found by companion_fuzz.py)": (
        "lp = torch.randn(12, 2, 5).log_softmax(2)\n"
        "run('aten::_ctc_loss_backward.Tensor', grad=torch.ones(2), log_probs=lp, targets=torch.tensor([[1, 2, 3],"
        " [2, 4, 1]]), input_lengths=torch.zeros(1, dtype=torch.int64), target_lengths=torch.tensor([3, 2]),"
        " neg_log_likelihood=torch.ones(2), log_alpha=torch.zeros(2, 12, 7), blank=0, zero_infinity=False)",
        "input_lengths and target_lengths must have one value per batch item (2)",
    ),
    "embedding_dense_backward with an index past the table (heap write)": (
        "run('aten::embedding_dense_backward', grad_output=torch.randn(4, 8), indices=torch.tensor([0, 1, 10**8, 3]),"
        " num_weights=10, padding_idx=-1, scale_grad_by_freq=False)",
        "indices (rows of a 10-row table) must lie in [0, 10)",
    ),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_trusting_kernel_is_refused_before_it_runs(name: str) -> None:
    code, message = HOSTILE[name]
    returncode, stdout = in_fork(code)
    assert returncode == 0, f"the child died ({returncode}): {stdout[-1500:]}"
    assert stdout.startswith("KernelError") and "refused before the kernel ran" in stdout, stdout
    assert message in stdout, stdout


class _Calls(TorchDispatchMode):  # type: ignore[misc]
    """Every op call with a family precondition: (op, positional args, keyword args)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, Any, list[Any], dict[str, Any]]] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        s = func._schema
        op = f"{s.name}.{s.overload_name}" if s.overload_name else s.name
        if family_of(op) is not None:
            self.calls.append((op, s, list(args), dict(kwargs or {})))
        return func(*args, **(kwargs or {}))


def _real_work() -> None:
    from torch import nn
    from torch.nn import functional as F

    torch.manual_seed(0)
    x4 = torch.randn(2, 4, 8, 8, requires_grad=True)
    for mod in (nn.BatchNorm2d(4), nn.GroupNorm(2, 4), nn.InstanceNorm2d(4, affine=True), nn.LayerNorm([8, 8])):
        for train in (True, False):
            mod.train(train)
            mod(x4).sum().backward()
    F.rms_norm(x4, [8], torch.ones(8, requires_grad=True)).sum().backward()
    y, _ = F.max_pool2d(x4, 2, return_indices=True)
    y.sum().backward()
    F.adaptive_max_pool2d(x4, 3).sum().backward()
    F.max_pool3d(torch.randn(1, 2, 4, 4, 4, requires_grad=True), 2).sum().backward()
    pooled, idx = F.max_pool2d(torch.randn(1, 2, 4, 4), 2, return_indices=True)
    F.max_unpool2d(pooled, idx, 2)
    for cls in (nn.LSTM, nn.GRU, nn.RNN):
        for kw in ({}, {"bidirectional": True, "num_layers": 2}, {"batch_first": True}):
            rnn = cls(6, 5, **kw)
            seq = torch.randn(3, 7, 6) if kw.get("batch_first") else torch.randn(7, 3, 6)
            rnn(seq)[0].sum().backward()
            packed = nn.utils.rnn.pack_padded_sequence(torch.randn(7, 3, 6), torch.tensor([7, 5, 2]))
            nn.utils.rnn.pad_packed_sequence(rnn(packed)[0])[0].sum().backward()
    nn.LSTM(6, 5, proj_size=3, num_layers=2)(torch.randn(4, 2, 6))[0].sum().backward()
    emb = nn.Embedding(10, 4)
    emb(torch.tensor([[1, 2], [3, 9]])).sum().backward()
    for mode in ("sum", "mean", "max"):
        bag = nn.EmbeddingBag(10, 4, mode=mode)
        bag(torch.tensor([1, 2, 4, 5, 4, 3]), torch.tensor([0, 2, 2, 5])).sum().backward()
    q = torch.randn(2, 3, 5, 8, requires_grad=True)
    F.scaled_dot_product_attention(q, q, q, is_causal=True).sum().backward()
    log_probs = torch.randn(12, 2, 5).log_softmax(2).requires_grad_()
    for targets in (torch.tensor([[1, 2, 3], [2, 4, 1]]), torch.tensor([1, 2, 3, 2, 4])):
        F.ctc_loss(log_probs, targets, torch.tensor([12, 10]), torch.tensor([3, 2])).backward()
        F.ctc_loss(log_probs, targets, [12, 10], [3, 2], reduction="sum").backward()
    for mode in ("reflect", "replicate"):
        for shape, pad in (((2, 3, 8), (1, 2)), ((2, 3, 6, 6), (1, 2, 2, 1)), ((1, 2, 4, 4, 4), (1, 1, 2, 0, 1, 2))):
            F.pad(torch.randn(*shape, requires_grad=True), pad, mode=mode).sum().backward()
    data = torch.randn(6, 3, requires_grad=True)
    torch.segment_reduce(data, "sum", lengths=torch.tensor([2, 0, 4])).sum().backward()
    torch.segment_reduce(data, "max", offsets=torch.tensor([0, 1, 6])).sum().backward()
    torch.fft.irfft(torch.fft.rfft(torch.randn(4, 6), dim=1), dim=1)
    torch.randn(4, 4).as_strided((2, 2), (4, 1), 1).sum()
    torch.empty(0).resize_as_(torch.ones(3))  # nn.CrossMapLRN2d does this to its fresh output
    conv = nn.utils.parametrizations.weight_norm(nn.Conv1d(4, 6, 3), dim=2)  # wav2vec2's positional conv
    conv(torch.randn(2, 4, 9)).sum().backward()
    nn.utils.weight_norm(nn.Linear(4, 5))(torch.randn(3, 4)).sum().backward()
    a = torch.randn(3, 4, 4)
    torch.linalg.eigvalsh(a @ a.mT), torch.linalg.solve(a @ a.mT + torch.eye(4), torch.randn(3, 4))
    torch.special.chebyshev_polynomial_t(torch.rand(5), 7), torch.special.hermite_polynomial_h(torch.rand(5), 3)
    out = torch.empty(2, 4, 8, 8)
    torch.softmax(x4.detach(), 1, out=out), torch.log_softmax(x4.detach(), 1, out=out)  # _softmax.out's family
    torch.nn.functional.logsigmoid(x4).sum().backward()
    torch.nn.functional.pad(x4, (1, 1, 1, 1), mode="replicate", value=None).sum().backward()
    torch.ops.aten.copy(torch.empty(2, 3), torch.randn(2, 3))  # what a functionalized graph makes of copy_
    dense = torch.randn(4, 6)
    dense.to_sparse().to_sparse_csr(), dense.to_sparse_csc(), dense.to_sparse_bsr((2, 2)), dense.to_sparse(2)
    params = [torch.randn(3, requires_grad=True), torch.randn(2, 2, requires_grad=True)]
    for opt in (torch.optim.Adam, torch.optim.AdamW, torch.optim.SGD, torch.optim.Adagrad):
        kw = {"momentum": 0.9} if opt is torch.optim.SGD else {}
        o = opt(params, lr=0.1, fused=True, **kw)
        for _ in range(2):
            sum(p.sum() for p in params).backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)  # _foreach_norm and _foreach_mul_
            o.step()
            o.zero_grad()


def _composite_calls() -> list[tuple[str, dict[str, Any]]]:
    """Calls of family ops torch implements as composites (no dispatch mode sees them), with real modules' values."""
    from torch import nn

    x, calls = torch.randn(2, 4, 8, 8), []
    for conv in (nn.Conv2d(4, 6, 3, groups=2), nn.ConvTranspose2d(4, 6, 3, groups=2)):  # a double backward's call
        w, g = conv.weight.detach(), conv(x).detach()
        calls.append(("aten::_convolution_double_backward", {
            "ggI": x, "ggW": w, "ggb": torch.ones(6), "gO": g, "weight": w, "self": x, "stride": [1, 1],
            "padding": [0, 0], "dilation": [1, 1], "transposed": isinstance(conv, nn.ConvTranspose2d),
            "output_padding": [0, 0], "groups": 2, "output_mask": [True] * 3,
        }))  # fmt: skip
    batch, hidden = 2, 3  # an LSTM and a GRU cell's double backward (CUDA's fused cells call them)
    state, lstm, gru = torch.randn(batch, hidden), torch.randn(batch, 4 * hidden), torch.randn(batch, 3 * hidden)
    calls.append(("aten::_thnn_differentiable_lstm_cell_backward", {
        "grad_hy": state, "grad_cy": state, "input_gates": lstm, "hidden_gates": lstm,
        "input_bias": torch.randn(4 * hidden), "hidden_bias": torch.randn(4 * hidden), "cx": state, "cy": state,
    }))  # fmt: skip
    calls.append(("aten::_thnn_differentiable_gru_cell_backward", {
        "grad_hy": state, "input_gates": gru, "hidden_gates": gru, "hx": state, "input_bias": None, "hidden_bias": None,
    }))  # fmt: skip
    return calls


def test_the_calls_real_modules_make_pass_every_family_check() -> None:
    mode = _Calls()
    with mode:
        _real_work()
    families = {family_of(op) for op, *_ in mode.calls}
    for op, kw in _composite_calls():
        families.add(family_of(op))
        check = precondition_for(op)
        assert check is not None and check([], kw) is None, (op, check and check([], kw))
    assert families == set(CHECKS), families  # every family met a real call
    for op, schema, pos, kw in mode.calls:
        names = [a.name for a in schema.arguments if not a.kwarg_only]
        check = precondition_for(op, names)
        if check is None:  # the functional form of an op whose precondition is on its out= tensors alone
            assert family_of(op) == "dense_out", op
            continue
        assert check(pos, kw) is None, (op, check(pos, kw))
