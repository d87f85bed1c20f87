"""The allowlist: kept as data derived from torch, and every execution attack of issue 16 refused before any node runs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from support.clirun import run_python
from support.hostile_exec import CHECKED_ATTACKS, ISSUE_ATTACKS, program

import opwire
from opwire.errors import BindError, KernelError
from opwire.proxy_executor import ProgramRunner, ProxyExecutor, exec_policy, opset_source
from opwire.proxy_executor.allowlist import allowlist, policy_table
from opwire.proxy_executor.targets import resolve
from opwire.schema import models as m


def _extern(nodes: list[m.Node]) -> m.ExternKernelNodes:
    return m.ExternKernelNodes(nodes=[m.ExternKernelNode(name=f"buf{i}", node=n) for i, n in enumerate(nodes)])


def test_every_core_op_is_admitted_or_refused_with_a_reason() -> None:
    """Torch's `core` set (what the core ATen IR holds) runs, except what review refuses by name, with its reason."""
    table = policy_table()
    for op in sorted(opset_source.core_ops()):
        cls, detail = table[op]
        if cls == "refused":
            assert detail in ("storage", "sparse", "process", "filesystem", "unchecked"), (op, detail)
            assert exec_policy.ExecPolicy().allowed(resolve(op)) is not None


def test_the_policy_file_matches_the_running_torch() -> None:
    """The whole policy, derived again from torch's registry: prints the diff when torch moved.

    In a process of its own (this worker's ops, registered by other tests, stay out of the derivation), forked from
    the worker's CLI fork server: torch is imported there once, not once more for this check (~2 CPU-s)."""
    code = "import sys\nfrom opwire.proxy_executor.opset_source import main\nsys.exit(main(['--check']))\n"
    proc = run_python(code, ignore_warnings=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert proc.stdout.strip() == "allowlist.txt matches the running torch"


def test_the_ops_real_work_needs_are_admitted() -> None:
    """Issue 25's refusals of ordinary work: each op is admitted (or admitted with its family's check)."""
    ops = allowlist()
    for op in (
        "aten::relu6", "aten::logsumexp", "aten::addcmul", "aten::argsort", "aten::tile", "aten::var_mean.correction",
        "aten::glu", "aten::prelu", "aten::erfinv", "aten::grid_sampler_2d", "aten::im2col", "aten::index_add",
        "aten::binary_cross_entropy_with_logits", "aten::smooth_l1_loss", "aten::kl_div",
        "aten::_upsample_bicubic2d_aa", "aten::_foreach_norm.Scalar", "aten::embedding_dense_backward",
        "aten::max_pool2d_with_indices_backward", "aten::diff", "aten::type_as", "aten::_weight_norm",
        "aten::as_strided_", "aten::floor_divide", "aten::histc", "aten::empty_permuted", "aten::_grouped_mm",
        "aten::slice_backward", "aten::new_empty_strided", "aten::mul.out", "aten::add.Tensor", "aten::convolution",
        "aten::sym_size.int", "aten::_safe_softmax", "aten::_fused_adamw_", "aten::_chunk_cat",
    ):  # fmt: skip
        assert op in ops, op
    for op in ("aten::from_file", "aten::_reshape_alias", "aten::resize_", "aten::set_.source_Tensor",
               "aten::_indices", "aten::_cufft_set_plan_cache_max_size", "aten::_nested_view_from_buffer"):  # fmt: skip
        assert op not in ops, op
    assert all(op.startswith("aten::") for op in ops)  # prims, inductor, profiler: not in exported programs


_NOW_CHECKED = {
    "max_pool2d_with_indices_backward with indices=1e8": "indices (positions in a plane of 16) must hold integers",
    "_fused_adam_ with mismatched sizes": "grads must hold one tensor per parameter (1), got 2",
    "_fused_adagrad_ with mismatched sizes": "grads must hold one tensor per parameter (1), got 2",
}


@pytest.mark.parametrize("name", list(ISSUE_ATTACKS))
def test_each_attack_is_refused_at_bind_naming_the_op_and_allow_ops(name: str) -> None:
    op, nodes = ISSUE_ATTACKS[name]
    pattern = rf"op {op}(\.\w+)? is refused by opwire's execution policy.*allow_ops=\['{op}'\]"
    with pytest.raises(BindError, match=pattern):
        ProxyExecutor(_extern(nodes))  # construction binds every extern node: nothing ran
    seen: list[str] = []
    runner = ProgramRunner(program(nodes), observer=lambda n, _: seen.append(n.target))
    x = torch.ones(16)
    with pytest.raises(BindError, match=pattern):
        runner(x)
    assert seen == [] and x.tolist() == [1.0] * 16  # refused before the first node ran


@pytest.mark.parametrize("name", list(_NOW_CHECKED))
def test_an_attack_on_an_admitted_kernel_fails_its_precondition(name: str) -> None:
    """Admitted since issue 25 (real training needs them), these kernels now run only after their family's check."""
    _, nodes = CHECKED_ATTACKS[name]
    x = torch.ones(1, 1, 4, 4) if "pool" in name else torch.ones(16)
    with pytest.raises(KernelError, match=re.escape(_NOW_CHECKED[name])):
        opwire.run_program(program(nodes), (x,))


def test_every_refused_op_is_named_at_once_with_one_allow_ops() -> None:
    """A program with three refused ops: one BindError naming all three, and the allow_ops that admits them."""
    nodes = [n for name in ("_reshape_alias past the storage, then fill_ (heap overflow write)",
                            "_convert_indices_from_csr_to_coo", "manual_seed reseeds the host's generator")
             for n in ISSUE_ATTACKS[name][1]]  # fmt: skip
    with pytest.raises(BindError) as info:
        ProgramRunner(program(nodes))(torch.ones(16))
    text = str(info.value)
    assert text.startswith("3 ops are refused by opwire's execution policy (graph node")
    assert text.endswith(
        "allow_ops=['aten::_reshape_alias', 'aten::_convert_indices_from_csr_to_coo', 'aten::manual_seed']"
    )
    with pytest.raises(BindError, match=r"^3 ops are refused"):
        ProxyExecutor(_extern(nodes))


def test_unsafe_true_is_refused_even_for_an_allowed_op() -> None:
    _, nodes = CHECKED_ATTACKS["segment_reduce(lengths=[1e8], unsafe=True)"]
    with pytest.raises(BindError, match=r"argument 'unsafe': unsafe=True asks the kernel to skip its bounds checks"):
        ProxyExecutor(_extern(nodes), allow_ops=["aten::segment_reduce"])
    ok = nodes[0].model_copy(deep=True)
    ok.inputs[-1].arg = m.Argument(as_bool=False)
    ok.inputs[2].arg = m.Argument(as_tensor=m.TensorArgument(name="lengths"))
    out = ProxyExecutor(allow_ops=["aten::segment_reduce"]).call(ok, {"x": torch.ones(4), "lengths": torch.tensor([4])})
    assert out["out"].tolist() == [4.0]


def test_user_library_ops_are_trusted_and_allow_ops_opens_one_op() -> None:
    assert exec_policy.ExecPolicy().allowed(resolve("aten::add.Tensor")) is None
    refusal = exec_policy.ExecPolicy().allowed(resolve("aten::_reshape_alias"))
    assert refusal is not None and refusal.category == "reinterpret"
    assert exec_policy.ExecPolicy(["aten::_reshape_alias"]).allowed(resolve("aten::_reshape_alias")) is None
    internal = exec_policy.ExecPolicy().allowed(resolve("aten::_convert_indices_from_coo_to_csr"))
    assert internal is not None and internal.category == "internal"
    unlisted = exec_policy.ExecPolicy().allowed(resolve("inductor::resize_storage_bytes_"))
    assert unlisted is not None and unlisted.category == "unlisted"


def test_kernel_warnings_reach_the_host_as_opwire_warnings_only(tmp_path: Path) -> None:
    """`add.out` into a wrong-shaped out warns in the kernel; the host sees one OpwireWarning, nothing raw on stderr."""
    code = (
        "import warnings, torch\n"
        "from opwire.errors import OpwireWarning\n"
        "from opwire.proxy_executor import ProxyExecutor\n"
        "from support.hostile_exec import node, t\n"
        "n = node('aten::add.out', {'self': t('x'), 'other': t('x'), 'out': t('o')}, 'r')\n"
        "ex = ProxyExecutor()\n"
        "with warnings.catch_warnings(record=True) as seen:\n"
        "    warnings.simplefilter('always')\n"
        "    ex.call(n, {'x': torch.ones(4), 'o': torch.ones(3)})\n"
        "print([(w.category.__name__, 'resized' in str(w.message)) for w in seen])\n"
        "warnings.simplefilter('ignore', OpwireWarning)\n"
        "ex.call(n, {'x': torch.ones(4), 'o': torch.ones(2)})\n"
    )
    tests = str(Path(__file__).parent.parent)
    proc = run_python(code, cwd=tests, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "[('OpwireWarning', True)]"
    assert proc.stderr == ""  # the second call's kernel warning was not printed raw


def test_run_program_refuses_before_running_in_a_subgraph() -> None:
    """An op refused inside a while_loop body is a BindError before the loop's first iteration."""
    from support.hostile_exec import while_forever

    archive = while_forever()
    body = archive.program.graph_module.graph.nodes[0].inputs[1].arg.value.graph
    body.nodes[0].target = "aten::_reshape_alias"
    seen: list[str] = []
    with pytest.raises(BindError, match=r"aten::_reshape_alias"):
        ProgramRunner(archive, observer=lambda n, _: seen.append(n.target))(torch.tensor(0), torch.zeros(3))
    assert seen == []


def test_opwire_run_program_runs_an_out_variant() -> None:
    _, nodes = CHECKED_ATTACKS["add.out into a wrong-shaped out (a kernel warning on stderr)"]
    out = opwire.run_program(program(nodes[:1]), (torch.ones(16),))  # admitted since issue 25: out= of a public op
    assert out.tolist() == [2.0] * 16


def test_ops_policy_says_admitted_which_precondition_or_why_refused(capsys: pytest.CaptureFixture[str]) -> None:
    from opwire.cli import main
    from opwire.proxy_executor.policy_report import explain

    assert main(["ops", "policy", "aten::add.Tensor", "aten::native_layer_norm_backward"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("aten::add.Tensor: admitted (public)")
    assert out[1].startswith("aten::native_layer_norm_backward: admitted after the layer_norm precondition: ")
    assert main(["ops", "policy", "aten::set_.source_Tensor", "aten::relu"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("aten::set_.source_Tensor: refused (storage): changes a tensor's storage")
    assert out[0].endswith("to run it anyway: --allow-op aten::set_.source_Tensor")
    assert [line.partition(": ")[0] for line in out[1:]] == ["aten::relu", "aten::relu.out"]
    assert [v.to_dict()["verdict"] for v in explain("aten::relu")] == ["admitted", "admitted"]
    assert main(["ops", "policy", "nope::x"]) == 2
    assert "is not a registered op" in capsys.readouterr().err


def test_the_hosts_own_stderr_lines_pass_through_a_guarded_run() -> None:
    """Lines the host writes to fd 2 while a guard is active reach its stderr unchanged; torch's warnings do not."""
    code = (
        "import os, warnings, torch\n"
        "from opwire.proxy_executor.guard import RunGuard\n"
        "warnings.simplefilter('ignore')\n"
        "with RunGuard('test') as guard:\n"
        "    for i in range(50):\n"
        "        os.write(2, f'host line {i}\\n'.encode())\n"
        "    guard.call('node', lambda: torch.ops.aten.add.out(torch.ones(4), torch.ones(4), out=torch.ones(3)))\n"
    )
    proc = run_python(code, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stderr.splitlines() == [f"host line {i}" for i in range(50)]
