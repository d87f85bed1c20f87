"""Issue 25, item 3: what the input fuzz (input_fuzz.py) found, each refused before its kernel runs, and a sample.

Each finding below crashed torch when a file's node made the call; through opwire it is a KernelError before
the kernel runs, checked in a forked child (support/forked.py), so a regression is a failed test and not a dead
pytest. The sample runs every case of a few ops on every axis (hostile_inputs.AXES), in forked children.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from proxy_executor.input_fuzz import SAMPLE
from support.clirun import run_python
from support.forked import in_fork

from opwire.proxy_executor.preconditions import family_of
from opwire.schema import models as m
from opwire.serde.tensors import TORCH_DTYPES
from opwire.serde.torch_enums import to_torch

FOUND: dict[str, tuple[str, str]] = {
    "_batch_norm_no_update with every optional None (SIGSEGV)": (
        "run('aten::_batch_norm_no_update', input=torch.randn(2, 3, 4), weight=None, bias=None, running_mean=None,"
        " running_var=None, momentum=0.1, eps=1e-5)",
        "training=False (and the eval-mode kernels) needs running_mean and running_var",
    ),
    "adaptive_max_pool3d_backward with overlapping indices (SIGSEGV)": (
        "idx = torch.zeros(12, dtype=torch.int64).as_strided((2, 3, 3, 3), (1, 1, 1, 1))\n"
        "run('aten::adaptive_max_pool3d_backward', grad_output=torch.randn(2, 3, 3, 3), self=torch.randn(2, 3, 8, 8),"
        " indices=idx)",
        "indices must be contiguous (or channels-last) as the forward made them, got strides (1, 1, 1, 1)",
    ),
    "max_pool3d_with_indices_backward.grad_input into an overlapping grad_input (heap write; a later call aborted)": (
        "x = torch.randn(1, 2, 4, 4, 4)\n"
        "y, i = torch.nn.functional.max_pool3d(x, 2, return_indices=True)\n"
        "run('aten::max_pool3d_with_indices_backward.grad_input', grad_output=torch.randn_like(y), self=x,"
        " kernel_size=[2, 2, 2], stride=[2, 2, 2], padding=[0, 0, 0], dilation=[1, 1, 1], ceil_mode=False, indices=i,"
        " grad_input=torch.zeros(12).as_strided(x.shape, (1, 1, 1, 1, 1)))",
        "grad_input is written as a dense buffer: it must be contiguous (or channels-last), got (1, 1, 1, 1, 1)",
    ),
    "the functional _foreach_copy of a oneDNN tensor (SIGSEGV)": (
        "run('aten::_foreach_copy', self=[torch.randn(3, 4).to_mkldnn()], src=[torch.randn(3, 4)])",
        "self is a _mkldnn tensor; the foreach family's kernels read strided tensors with data",
    ),
    "_foreach_copy.out of a sparse CSR tensor (SIGSEGV)": (
        "run('aten::_foreach_copy.out', self=[torch.randn(3, 4).to_sparse_csr()], src=[torch.randn(3, 4)],"
        " out=[torch.empty(3, 4)])",
        "self is a sparse_csr tensor",
    ),
    "_foreach_add.List with lists of two lengths": (
        "run('aten::_foreach_add.List', self=[torch.ones(2), torch.ones(2)], other=[torch.ones(2)])",
        "the tensor lists must have one length, got self: 2, other: 1",
    ),
    "_convolution_double_backward with a 0-d gO (SIGSEGV)": (
        "x, w = torch.randn(2, 3, 5, 5), torch.randn(4, 3, 3, 3)\n"
        "run('aten::_convolution_double_backward', ggI=torch.randn_like(x), ggW=torch.randn_like(w), ggb=torch.randn(4),"
        " gO=torch.tensor(1.0), weight=w, self=x, stride=[1, 1], padding=[0, 0], dilation=[1, 1], transposed=False,"
        " output_padding=[0, 0], groups=1, output_mask=[True, True, True])",
        "self (2, 3, 5, 5), weight (4, 3, 3, 3) and gO () must share one rank of at least 3",
    ),
    "_thnn_differentiable_lstm_cell_backward with 4-D gates (SIGSEGV on any shape but the cell's)": (
        "x = torch.randn(2, 3, 4, 4)\n"
        "run('aten::_thnn_differentiable_lstm_cell_backward', grad_hy=x, grad_cy=x, input_gates=x, hidden_gates=x,"
        " input_bias=x, hidden_bias=x, cx=x, cy=x)",
        "the cell state must be 2-D (batch, hidden), got shape (2, 3, 4, 4)",
    ),
    "_thnn_differentiable_gru_cell_backward with short gates": (
        "h = torch.randn(2, 3)\n"
        "run('aten::_thnn_differentiable_gru_cell_backward', grad_hy=h, input_gates=torch.randn(2, 3),"
        " hidden_gates=torch.randn(2, 9), hx=h, input_bias=None, hidden_bias=None)",
        "input_gates must be (2, 9) for batch 2 and hidden 3 (3 gates), got (2, 3)",
    ),
    "_weight_norm with a 4096-element v against its g (SIGABRT)": (
        "run('aten::_weight_norm_interface', v=torch.zeros(4096), g=torch.randn(2, 1, 1, 1), dim=0)",
        "g must have one value per slice of v along dim 0 (4096), got shape (2, 1, 1, 1)",
    ),
    "linalg_eigvalsh.out into its own input (double free or corruption)": (
        "a = torch.randn(2, 3, 4, 4)\nrun('aten::linalg_eigvalsh.out', self=a, UPLO='L', out=a)",
        "out shares memory with an input the kernel reads",
    ),
    "special_laguerre_polynomial_l of degree 2**40 (a hang: one step per degree and element)": (
        "run('aten::special_laguerre_polynomial_l', x=torch.randn(2, 3), n=torch.full((2, 3), 2.0**40))",
        "over 1e+09",
    ),
    "_log_softmax_backward_data.out into a zero-stride out (a write past its storage: SIGSEGV later)": (
        "g = torch.randn(2, 3, 4, 4)\n"
        "run('aten::_log_softmax_backward_data.out', grad_output=g, output=g.log_softmax(1), dim=1,"
        " input_dtype=torch.float32, out=torch.zeros(1).expand(2, 3, 4, 4))",
        "out is written as a dense buffer: it must be contiguous (or channels-last), got (0, 0, 0, 0)",
    ),
    "_softmax.out into an overlapping out (a write past its storage)": (
        "run('aten::_softmax.out', self=torch.randn(2, 3, 4, 4), dim=1, half_to_float=False,"
        " out=torch.zeros(12).as_strided((2, 3, 4, 4), (1, 1, 1, 1)))",
        "out is written as a dense buffer",
    ),
    "log_sigmoid_forward.output into an overlapping buffer (heap corruption: a later case aborted)": (
        "x = torch.randn(2, 3, 4, 4)\n"
        "run('aten::log_sigmoid_forward.output', self=x, output=torch.empty_like(x),"
        " buffer=torch.zeros(12).as_strided((2, 3, 4, 4), (1, 1, 1, 1)))",
        "buffer is written as a dense buffer",
    ),
    "replication_pad2d.out into an overlapping out (heap corruption: a later case aborted)": (
        "run('aten::replication_pad2d.out', self=torch.randn(1, 2, 4, 4), padding=[1, 1, 1, 1],"
        " out=torch.zeros(16).as_strided((1, 2, 6, 6), (1, 1, 1, 1)))",
        "out is written as a dense buffer",
    ),
    "adaptive_avg_pool3d_backward.grad_input into a zero-stride grad_input (a write past its storage: "
    "MemoryError, then SIGSEGV, in later cases)": (
        "x = torch.randn(2, 3, 4, 4, 4)\n"
        "run('aten::adaptive_avg_pool3d_backward.grad_input', grad_output=torch.randn(2, 3, 2, 2, 2), self=x,"
        " grad_input=torch.zeros(1).expand(x.shape))",
        "grad_input is written as a dense buffer: it must be contiguous (or channels-last), got (0, 0, 0, 0, 0)",
    ),
    "the functional copy of a sparse CSR self (SIGSEGV; the memory estimate's own error hid it)": (
        "run('aten::copy', self=torch.eye(3).to_sparse_csr(), src=torch.randn(3, 3))",
        "self is a sparse_csr tensor; the strided_only family's kernels read strided tensors with data",
    ),
    "to_sparse_csr with a dense dimension, whose sum with a strided tensor is a SIGSEGV": (
        "run('aten::to_sparse_csr', self=torch.randn(2, 3, 5), dense_dim=1)",
        "dense_dim must be None or 0",
    ),
    "to_sparse_csr of a hybrid COO tensor (the same SIGSEGV one node later)": (
        "run('aten::to_sparse_csr', self=torch.randn(2, 3, 5).to_sparse(2))",
        "self has 1 dense dimensions",
    ),
    "a sparse tensor into a trusting kernel (its check raised RuntimeError)": (
        "x = torch.randn(4, 6)\n"
        "run('aten::embedding_dense_backward', grad_output=torch.randn(4, 8).to_sparse(), indices=torch.tensor([0, 1, 2, 3]),"
        " num_weights=10, padding_idx=-1, scale_grad_by_freq=False)",
        "grad_output is a sparse_coo tensor; the embedding family's kernels read strided tensors with data",
    ),
    "a meta tensor into a trusting kernel (its check raised on .item())": (
        "run('aten::_ctc_loss.Tensor', log_probs=torch.randn(12, 2, 5).log_softmax(2),"
        " targets=torch.tensor([[1, 2, 3], [2, 4, 1]]).to('meta'), input_lengths=torch.tensor([12, 10]),"
        " target_lengths=torch.tensor([3, 2]), blank=0, zero_infinity=False)",
        "targets is a meta tensor",
    ),
    "uint16 index tensors (the check's min raised NotImplementedError)": (
        "run('aten::embedding_dense_backward', grad_output=torch.randn(4, 8), indices=torch.tensor([0, 1, 2, 3],"
        " dtype=torch.uint16), num_weights=10, padding_idx=-1, scale_grad_by_freq=False)",
        "must hold integers (int64, int32, int16, int8 or uint8), got torch.uint16",
    ),
}


def test_a_file_cannot_make_a_onednn_tensor() -> None:
    """index_add_, index_copy_ and cummaxmin_backward crashed (SIGSEGV) on oneDNN tensors a file made with to_mkldnn
    or a layout=_mkldnn factory: both are refused before anything runs."""
    code = (
        "from opwire.errors import BindError\n"
        "for op, values in (('aten::to_mkldnn', {'self': torch.randn(3, 4)}),"
        " ('aten::zeros', {'size': [3, 4], 'layout': torch._mkldnn})):\n"
        "    try:\n"
        "        run(op, **values)\n"
        "    except BindError as exc:\n"
        "        print('BindError', exc)\n"
    )
    returncode, stdout = in_fork(code)
    assert returncode == 0, stdout
    lines = stdout.splitlines()
    assert len(lines) == 2 and all(line.startswith("BindError") for line in lines), stdout
    assert (
        "to_mkldnn" in lines[0] and "oneDNN" in lines[0] and "layout _mkldnn makes oneDNN's opaque tensors" in lines[1]
    )


@pytest.mark.parametrize("name", list(FOUND))
def test_each_input_fuzz_finding_is_refused_before_its_kernel_runs(name: str) -> None:
    code, message = FOUND[name]
    returncode, stdout = in_fork(code)
    assert returncode == 0, f"the child died ({returncode}): {stdout[-1500:]}"
    assert stdout.startswith("KernelError") and "refused before the kernel ran" in stdout, stdout
    assert message in stdout, stdout


def test_a_file_can_make_no_quantized_tensor() -> None:
    """The file axis fuzzes meta, sparse and oneDNN tensors only: no ScalarType a file names is quantized."""
    quantized = {torch.qint8, torch.quint8, torch.qint32, torch.quint4x2, torch.quint2x4}
    assert not quantized & set(TORCH_DTYPES.values())
    assert {str(layout) for layout in to_torch("Layout").values()} == {
        "torch.strided", "torch.sparse_coo", "torch.sparse_csr", "torch.sparse_csc", "torch.sparse_bsr",
        "torch.sparse_bsc", "torch._mkldnn",
    }  # fmt: skip
    assert len(TORCH_DTYPES) == len([s for s in m.ScalarType if s != m.ScalarType.UNKNOWN])


@pytest.fixture(scope="module")
def sample_found() -> dict[str, list[list[str]]]:
    """The sample's outcomes, from a process whose forked children inherit no OpenMP pool (a child of the CLI fork
    server, which never runs an op): a child forked from a process that ran a parallel region (this test worker,
    after other tests) hangs at its first parallel region with more threads, which the threads axis asks for."""
    tests = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")])}
    code = "import sys; from proxy_executor.input_fuzz import main; sys.exit(main(['--sample']))"
    done = run_python(code, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    found: dict[str, list[list[str]]] = json.loads(done.stdout)
    return found


@pytest.mark.parametrize("op", list(SAMPLE))
def test_the_input_fuzz_sample_finds_no_crash_it_does_not_refuse_first(
    op: str, sample_found: dict[str, list[list[str]]]
) -> None:
    """Every case of a few ops, every axis; the long run (input_fuzz.py) covers every admitted op."""
    found = sample_found[op]
    assert len({axis for _, axis, _, _ in found}) >= 6
    assert [f for f in found if f[2] in ("crash", "hang")] == []
    if family_of(op) is not None:  # the family's check reads every argument: it raises nothing
        assert [f for f in found if f[2] == "foreign"] == []
