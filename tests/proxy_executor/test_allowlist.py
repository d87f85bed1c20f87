"""The allowlist: kept as data derived from torch, and every execution attack of issue 16 refused before any node runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from support.hostile_exec import ISSUE_ATTACKS, program

import opwire
from opwire.errors import BindError
from opwire.proxy_executor import ProgramRunner, ProxyExecutor, exec_policy, opset_source
from opwire.proxy_executor.allowlist import allowlist, read_allowlist
from opwire.proxy_executor.preconditions import REMOVED
from opwire.proxy_executor.targets import resolve
from opwire.schema import models as m


def _extern(nodes: list[m.Node]) -> m.ExternKernelNodes:
    return m.ExternKernelNodes(nodes=[m.ExternKernelNode(name=f"buf{i}", node=n) for i, n in enumerate(nodes)])


def test_the_allowlist_holds_torchs_core_tag() -> None:
    """When torch's `core` set moves, this shows the diff (regenerate: python -m opwire.proxy_executor.opset_source)."""
    listed = read_allowlist(opset_source.DATA.read_text())
    core = opset_source.core_ops()
    kept = {op for op in core if op not in REMOVED and exec_policy.classify_name(op) is None}
    marked = {op for op, src in listed.items() if "core" in src.split("+")}
    assert sorted(kept - marked) == [] and sorted(marked - kept) == [], (
        f"torch's core tag moved: new {sorted(kept - marked)}, gone {sorted(marked - kept)}"
    )


@pytest.mark.slow
def test_the_allowlist_matches_what_torch_export_emits() -> None:
    """The whole list, derived again (exports of the representative modules): prints the diff when torch moved."""
    proc = subprocess.run(
        [sys.executable, "-W", "ignore", "-m", "opwire.proxy_executor.opset_source", "--check"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-4000:]


def test_the_list_is_reviewed() -> None:
    ops = allowlist()
    for op in REMOVED:
        assert op not in ops
    for op in (
        "aten::add.Tensor",
        "aten::convolution",
        "aten::sym_size.int",
        "aten::linear",
        "aten::where.ScalarOther",
    ):
        assert op in ops
    for op in ("aten::add.out", "aten::from_file", "aten::_reshape_alias", "aten::manual_seed", "aten::resize_"):
        assert op not in ops
    assert all(op.startswith("aten::") for op in ops)  # prims, inductor, profiler: not in exported programs


@pytest.mark.parametrize("name", list(ISSUE_ATTACKS))
def test_each_attack_is_refused_at_bind_naming_the_op_and_the_flag(name: str) -> None:
    op, nodes = ISSUE_ATTACKS[name]
    pattern = rf"op {op}(\.\w+)? is refused by opwire's execution policy.*allow_ops=\['{op}'\] or --allow-op {op}"
    with pytest.raises(BindError, match=pattern):
        ProxyExecutor(_extern(nodes))  # construction binds every extern node: nothing ran
    seen: list[str] = []
    runner = ProgramRunner(program(nodes), observer=lambda n, _: seen.append(n.target))
    x = torch.ones(16)
    with pytest.raises(BindError, match=pattern):
        runner(x)
    assert seen == [] and x.tolist() == [1.0] * 16  # refused before the first node ran


def test_unsafe_true_is_refused_even_for_an_allowed_op() -> None:
    _, nodes = ISSUE_ATTACKS["segment_reduce(lengths=[1e8], unsafe=True)"]
    with pytest.raises(BindError, match=r"argument 'unsafe': unsafe=True asks the kernel to skip its bounds checks"):
        ProxyExecutor(_extern(nodes), allow_ops=["aten::segment_reduce"])
    ok = nodes[0].model_copy(deep=True)
    ok.inputs[-1].arg = m.Argument(as_bool=False)
    ok.inputs[2].arg = m.Argument(as_tensor=m.TensorArgument(name="lengths"))
    out = ProxyExecutor(allow_ops=["aten::segment_reduce"]).call(ok, {"x": torch.ones(4), "lengths": torch.tensor([4])})
    assert out["out"].tolist() == [4.0]


def test_user_library_ops_are_trusted_and_allow_ops_opens_one_op() -> None:
    assert exec_policy.ExecPolicy().allowed(resolve("aten::add.Tensor")) is None
    refusal = exec_policy.ExecPolicy().allowed(resolve("aten::add.out"))
    assert refusal is not None and refusal.category == "unlisted"
    assert exec_policy.ExecPolicy(["aten::add.out"]).allowed(resolve("aten::add.out")) is None
    assert exec_policy.ExecPolicy(["aten::add"]).allowed(resolve("aten::add.out")) is None
    removed = exec_policy.ExecPolicy().allowed(resolve("aten::max_pool2d_with_indices_backward"))
    assert removed is not None and removed.category == "removed"


def test_kernel_warnings_reach_the_host_as_opwire_warnings_only(tmp_path: Path) -> None:
    """`add.out` into a wrong-shaped out warns in the kernel; the host sees one OpwireWarning, nothing raw on stderr."""
    code = (
        "import warnings, torch\n"
        "from opwire.errors import OpwireWarning\n"
        "from opwire.proxy_executor import ProxyExecutor\n"
        "from support.hostile_exec import ISSUE_ATTACKS, node, t\n"
        "n = node('aten::add.out', {'self': t('x'), 'other': t('x'), 'out': t('o')}, 'r')\n"
        "ex = ProxyExecutor(allow_ops=['aten::add.out'])\n"
        "with warnings.catch_warnings(record=True) as seen:\n"
        "    warnings.simplefilter('always')\n"
        "    ex.call(n, {'x': torch.ones(4), 'o': torch.ones(3)})\n"
        "print([(w.category.__name__, 'resized' in str(w.message)) for w in seen])\n"
        "warnings.simplefilter('ignore', OpwireWarning)\n"
        "ex.call(n, {'x': torch.ones(4), 'o': torch.ones(2)})\n"
    )
    tests = str(Path(__file__).parent.parent)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tests, timeout=300)
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


def test_opwire_run_program_accepts_the_allowed_op_by_name() -> None:
    _, nodes = ISSUE_ATTACKS["add.out into a wrong-shaped out (a kernel warning on stderr)"]
    out = opwire.run_program(program(nodes[:1]), (torch.ones(16),), allow_ops=["aten::add.out"])
    assert out.tolist() == [2.0] * 16
