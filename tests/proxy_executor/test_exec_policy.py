"""The execution policy: refused ops computed from every registered schema, the opt-in, and the budgets."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from support.clirun import run_python
from support.hostile_exec import bad_csr_nodes, from_file_nodes, program, sym_node, while_forever

import opwire
from opwire.errors import BindError, BudgetError
from opwire.proxy_executor import ExecPolicy, ProgramRunner, ProxyExecutor, exec_policy
from opwire.proxy_executor.run_budgets import checked_sym_op
from opwire.proxy_executor.targets import resolve
from opwire.schema import models as m

_FILENAME_LIKE = re.compile(r"file|path|dir|url", re.IGNORECASE)


def _extern(nodes: list[m.Node]) -> m.ExternKernelNodes:
    return m.ExternKernelNodes(nodes=[m.ExternKernelNode(name=f"buf{i}", node=n) for i, n in enumerate(nodes)])


def test_every_torch_schema_is_classified() -> None:
    """A new op with a filename-like or unknown `str` argument, or `unsafe` in its name, fails here."""
    unplaced = []
    for schema in exec_policy.all_schemas():
        if schema.namespace not in exec_policy.TORCH_NAMESPACES:
            continue
        refusal = exec_policy.classify(schema)
        if refusal is not None and refusal.category == "unclassified":
            unplaced.append(f"{schema.qualname}: {refusal.reason}")
        str_args = [a.name for a in schema.arguments if "str" in re.findall(r"[A-Za-z_]+", a.type)]
        if any(_FILENAME_LIKE.search(a) for a in str_args) and (refusal is None or refusal.category != "filesystem"):
            unplaced.append(f"{schema.qualname}: filename-like str argument {str_args} but not refused as filesystem")
        if "unsafe" in schema.name and refusal is None and schema.name not in exec_policy._REVIEWED_UNSAFE:
            unplaced.append(f"{schema.qualname}: unsafe op neither refused nor reviewed")
    assert not unplaced, "classify these in opwire/proxy_executor/exec_policy.py:\n" + "\n".join(unplaced)


def test_the_refused_set_holds_the_known_attacks() -> None:
    refused = {r.op: r for r in exec_policy.refusal_table()}
    for op in ("aten::from_file", "aten::from_file.out", "aten::save", "debugprims::load_tensor"):
        assert refused[op].category == "filesystem"
    for op in (
        "aten::_sparse_csr_tensor_unsafe",
        "aten::_sparse_coo_tensor_unsafe",
        "aten::sparse_csr_tensor.crow_col_value_size",
    ):
        assert refused[op].category == "unchecked"
    assert refused["_c10d_functional::all_reduce"].category == "process"
    assert not refused["aten::_sparse_coo_tensor_unsafe"].sparse_checks_lift
    for ok in ("aten::add.Tensor", "aten::_unsafe_view", "aten::div.Tensor_mode", "aten::einsum", "aten::gelu"):
        assert ok not in refused


def test_torch_registers_no_namespace_outside_the_table() -> None:
    code = "import torch; print(sorted({n.split('::')[0] for n in torch._C._dispatch_get_all_op_names()}))"
    out = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert set(eval(out)) <= exec_policy.TORCH_NAMESPACES


def test_refused_op_is_a_bind_error_at_bind_time(tmp_path: Path) -> None:
    path = tmp_path / "x.pth"
    with pytest.raises(BindError, match=r"extern node 0 'buf0' \(aten::from_file\): op aten::from_file is refused"):
        ProxyExecutor(_extern(from_file_nodes(str(path), shared=True)))
    with pytest.raises(BindError, match=r"aten::_sparse_csr_tensor_unsafe is refused .*check_sparse_tensor_invariants"):
        ProxyExecutor(_extern(bad_csr_nodes()))
    ex = ProxyExecutor()
    with pytest.raises(BindError, match=r"op aten::from_file is refused.*allow_ops=\['aten::from_file'\]"):
        ex.call(from_file_nodes(str(path), shared=True)[0], {})
    assert not path.exists()


def test_allow_ops_runs_a_refused_op(tmp_path: Path) -> None:
    path = tmp_path / "data.bin"
    path.write_bytes(b"hello")
    (read, *_) = from_file_nodes(str(path), shared=False, size=5)
    for allow in (["aten::from_file"], ["aten::from_file.default"], ["torch.ops.aten.from_file.default"]):
        out = ProxyExecutor(allow_ops=allow).call(read, {})
        assert bytes(out["mapped"].tolist()) == b"hello"
    with pytest.raises(BindError, match="refused"):
        ProxyExecutor(allow_ops=["aten::from_file.out"]).call(read, {})
    with pytest.raises(BindError, match=r"allow_ops entry 'from_file' is not an op name"):
        ProxyExecutor(allow_ops=["from_file"])


def test_as_operator_arguments_obey_the_policy(tmp_path: Path) -> None:
    from support.hostile_exec import with_effects_from_file

    archive = program(with_effects_from_file(str(tmp_path / "w.pth")))
    with pytest.raises(
        BindError, match=r"graph node 0 \(torch.ops.higher_order.with_effects\) input 1: op aten::from_file is refused"
    ):
        opwire.run_program(archive, (torch.ones(16),))
    assert not (tmp_path / "w.pth").exists()


def test_a_user_library_is_trusted() -> None:
    lib = torch.library.Library("opwire_safety_test", "DEF")
    lib.define("touch(str filename, Tensor x) -> Tensor")
    lib.impl("touch", lambda filename, x: x + len(filename), "CompositeExplicitAutograd")
    n = m.Node(
        target="opwire_safety_test::touch",
        inputs=[
            m.NamedArgument(name="filename", arg=m.Argument(as_string="abc")),
            m.NamedArgument(name="x", arg=m.Argument(as_tensor=m.TensorArgument(name="x"))),
        ],
        outputs=[m.Argument(as_tensor=m.TensorArgument(name="y"))],
        metadata={},
    )
    assert ProxyExecutor().call(n, {"x": torch.zeros(1)})["y"].item() == 3


def test_sparse_invariant_checks_make_an_allowed_constructor_safe_in_a_child() -> None:
    """Allowed by name with torch's sparse checks on, the CSR constructor's bad indices are a KernelError (no crash)."""
    code = (
        "import torch\nfrom support.hostile_exec import bad_csr_nodes, program\nimport opwire\n"
        "from opwire.errors import KernelError\n"
        "allow = ['aten::_sparse_csr_tensor_unsafe', 'aten::_to_dense']\n"
        "with torch.sparse.check_sparse_tensor_invariants():\n"
        "    try:\n        opwire.run_program(program(bad_csr_nodes()), (torch.ones(2, 2),), allow_ops=allow)\n"
        "    except KernelError as e:\n        print('KernelError', e)\n"
    )
    tests = str(Path(__file__).parent.parent)
    proc = run_python(code, cwd=tests, ignore_warnings=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "KernelError" in proc.stdout and "crow_indices" in proc.stdout


@pytest.mark.parametrize(
    ("fn", "args", "message"),
    [
        ("_operator.pow", (3, 10**9), r"pow\(3, 1000000000\) would have about 1.58e\+09 bits"),
        ("_operator.lshift", (1, 2**34), r"lshift\(1, 17179869184\) would have 17179869185 bits"),
        ("_operator.pow", (2, 63), r"pow\(2, 63\) gives a 64-bit integer"),
        ("_operator.mul", (2**40, 2**40), r"mul\(1099511627776, 1099511627776\) gives a 81-bit integer"),
        ("torch.sym_int", (1e300,), r"sym_int\(1e\+300\) gives a 997-bit integer"),
    ],
)
def test_symbolic_arithmetic_stays_within_i64(fn: str, args: tuple[object, ...], message: str) -> None:
    start = time.monotonic()
    with pytest.raises(BudgetError, match=message) as info:
        resolve(fn).fn(*args)
    assert info.value.budget == "i64" and "cannot be raised" in str(info.value)
    assert time.monotonic() - start < 1.0  # refused before computing: pow(3, 10**9) alone takes minutes


def test_symbolic_arithmetic_in_range_is_unchanged() -> None:
    assert resolve("_operator.pow").fn(-2, 63) == -(2**63)
    assert resolve("_operator.lshift").fn(1, 62) == 2**62
    assert resolve("operator.mul").fn(3, 4) == 12
    assert resolve("_operator.truediv").fn(1, 4) == 0.25
    assert checked_sym_op(abs)(-3) == 3


def test_symbolic_budget_in_a_program() -> None:
    with pytest.raises(BudgetError, match=r"pow\(3, 1000000000\)"):
        opwire.run_program(program(sym_node("_operator.pow", 3, 10**9)), (torch.ones(16),))


def test_while_loop_iteration_budget_and_timeout() -> None:
    archive = while_forever()
    args = (torch.tensor(0), torch.zeros(3))
    with pytest.raises(BudgetError, match=r"while_loop ran 50 iterations in this run .*max_while_iterations=") as info:
        opwire.run_program(archive, args, max_while_iterations=50)
    assert info.value.budget == "max_while_iterations"
    with pytest.raises(BudgetError, match=r"exceeded its wall-time budget of 0.2 s") as info:
        opwire.run_program(archive, args, max_while_iterations=10**9, timeout=0.2)
    assert info.value.budget == "timeout"


def test_an_honest_while_loop_runs_within_the_budget() -> None:
    archive = while_forever()
    cond = archive.program.graph_module.graph.nodes[0].inputs[0].arg.value.graph.nodes[0]
    cond.target, cond.inputs[1].arg = "torch.ops.aten.lt.Scalar", m.Argument(as_int=7)
    i, x = opwire.run_program(archive, (torch.tensor(0), torch.zeros(3)), max_while_iterations=7)  # n, not n+1
    assert i.item() == 7 and x.tolist() == [7.0, 7.0, 7.0]


def test_the_runners_memory_budget_is_the_policys() -> None:
    """One source of truth: `ProgramRunner.max_memory` reads `exec_policy.max_memory`; the two may not disagree."""
    archive = program([])
    assert ProgramRunner(archive, max_memory=123 << 20).exec_policy.max_memory == 123 << 20
    runner = ProgramRunner(archive, exec_policy=ExecPolicy(max_memory=77 << 20))
    assert runner.max_memory == 77 << 20
    assert (
        ProgramRunner(archive, exec_policy=ExecPolicy(max_memory=77 << 20), max_memory=77 << 20).max_memory == 77 << 20
    )
    with pytest.raises(AttributeError):
        runner.max_memory = 1  # type: ignore[misc]  # no second attribute that could disagree with the policy
    message = (
        "max_memory=1024 disagrees with exec_policy.max_memory=80740352; pass the budget in one place (the policy's is "
        "the one that applies)"
    )
    with pytest.raises(BindError, match=f"^{re.escape(message)}$"):
        ProgramRunner(archive, exec_policy=ExecPolicy(max_memory=77 << 20), max_memory=1024)


def test_policy_arguments_are_checked() -> None:
    with pytest.raises(BindError, match="max_while_iterations must be a positive int"):
        ExecPolicy(max_while_iterations=0)
    with pytest.raises(BindError, match="timeout must be a positive number"):
        ExecPolicy(timeout=-1)


def test_replay_refuses_before_running_and_allow_ops_opts_in(tmp_path: Path) -> None:
    from support.hostile_exec import trace_case

    argv = trace_case(lambda d: from_file_nodes(str(d / "w.pth"), shared=True))(tmp_path)
    with pytest.raises(BindError, match=r"call 0 \(aten::from_file\): op aten::from_file is refused"):
        opwire.replay(argv[0], mode="chained")
    assert not (tmp_path / "w.pth").exists()
    report = opwire.replay(argv[0], mode="chained", allow_ops=["aten::from_file"])
    assert report.replayed == 4 and (tmp_path / "w.pth").read_bytes()[:1] == b"A"


def test_map_rows_and_scan_steps_count_in_the_loop_budget() -> None:
    """A map over a file-sized leading dimension is bounded like a while_loop (issue 25): one total per run."""
    from torch._higher_order_ops.map import map as hop_map
    from torch._higher_order_ops.scan import scan

    class Rows(torch.nn.Module):
        def forward(self, xs: torch.Tensor) -> torch.Tensor:
            mapped = hop_map(lambda x: x * 2, xs)
            carry, _ = scan(lambda c, x: (c + x, c.clone()), torch.zeros(3), xs)
            return mapped.sum() + carry.sum()

    xs = torch.ones(5, 3)
    ep = torch.export.export(Rows(), (xs,))
    assert opwire.run_program(ep, (xs,), max_while_iterations=10).item() == 45.0  # 5 rows + 5 steps
    with pytest.raises(BudgetError, match=r"map/scan ran 9 iterations in this run .*rows remained") as info:
        opwire.run_program(ep, (xs,), max_while_iterations=9)
    assert info.value.budget == "max_while_iterations"


def _writes_through(alias: list[m.Node]) -> list[m.Node]:
    from support.hostile_exec import node, t

    return [*alias, node("aten::add_.Tensor", {"self": t("view"), "other": t("view")}, "out")]


@pytest.mark.parametrize(
    "alias",
    [
        "_unsafe_view",
        "einsum",
        "unsafe_split",
    ],
)
def test_a_write_through_an_undeclared_alias_is_refused_by_storage(alias: str) -> None:
    """_unsafe_view, einsum('i->i') and unsafe_split return views with no alias annotation: the write is still seen."""
    from support.hostile_exec import node, t

    ints = lambda *v: m.Argument(as_ints=list(v))  # noqa: E731
    first = {
        "_unsafe_view": [node("aten::_unsafe_view", {"self": t("x"), "size": ints(16)}, "view")],
        "einsum": [
            node("aten::einsum", {"equation": m.Argument(as_string="i->i"), "tensors": m.Argument(
                as_tensors=[m.TensorArgument(name="x")])}, "view")
        ],
        "unsafe_split": [
            m.Node(
                target="aten::unsafe_split.Tensor",
                inputs=[m.NamedArgument(name="self", arg=t("x")), m.NamedArgument(name="split_size",
                                                                                   arg=m.Argument(as_int=16))],
                outputs=[m.Argument(as_tensors=[m.TensorArgument(name="view")])],
                metadata={},
            )
        ],
    }[alias]  # fmt: skip
    x = torch.ones(16)
    with pytest.raises(BindError, match=r"writes into user input 'x' through 'view', which shares its storage"):
        opwire.run_program(program(_writes_through(first)), (x,))
    assert x.tolist() == [1.0] * 16  # the caller's tensor is untouched: refused before the write


@pytest.mark.parametrize(
    ("op", "values"),
    [
        ("aten::clone", {"self": torch.ones(1).expand(2**34)}),  # 4 bytes in, 64 GiB out
        ("aten::contiguous", {"self": torch.ones(1, 1).expand(2**17, 2**17)}),
        ("aten::mul.Tensor", {"self": torch.ones(2**17, 1), "other": torch.ones(1, 2**17)}),  # a broadcast
        ("aten::add.Tensor", {"self": torch.ones(1).expand(2**34), "other": torch.ones(1)}),
        ("aten::one_hot", {"self": torch.tensor([2**40]), "num_classes": -1}),
        ("aten::nonzero", {"self": torch.ones(1).expand(2**34)}),  # its bound: every element non-zero, 128 GiB
        ("aten::bincount", {"self": torch.tensor([2**40])}),
        ("aten::repeat_interleave.Tensor", {"repeats": torch.tensor([2**40])}),
        ("aten::outer", {"self": torch.ones(2**17), "vec2": torch.ones(2**17)}),
        ("aten::diag_embed", {"self": torch.ones(2**17)}),
        ("aten::mul.out", {"self": torch.ones(2**17, 1), "other": torch.ones(1, 2**17), "out": torch.ones(1)}),
    ],
)
def test_outputs_larger_than_their_inputs_are_estimated_before_the_kernel(op: str, values: dict[str, object]) -> None:
    """Expanded views, broadcasts and data-dependent sizes (issue 25): a BudgetError, nothing allocated."""
    from support.op_call import call_node

    node, env = call_node(op, **values)
    with pytest.raises(BudgetError, match=r"outputs would take [\d,]+ bytes, over the execution-memory budget"):
        ProxyExecutor().call(node, env)


def test_ordinary_calls_pass_the_memory_estimate() -> None:
    from support.op_call import call_node

    for op, values in (
        ("aten::clone", {"self": torch.ones(3).expand(2, 3)}),
        ("aten::one_hot", {"self": torch.tensor([0, 3]), "num_classes": -1}),
        ("aten::nonzero", {"self": torch.tensor([0.0, 1.0, 2.0])}),
        ("aten::mul.Tensor", {"self": torch.ones(4, 1), "other": torch.ones(1, 4)}),
    ):
        node, env = call_node(op, **values)
        out = ProxyExecutor().call(node, env)["out0"]
        assert out.numel() > 0


def test_a_view_reaching_outside_its_storage_is_refused_after_the_kernel() -> None:
    """Every view a kernel returns is checked against its storage. torch's own views stay inside (as_strided
    checks); a kernel bug returning wider metadata is what the check is for, so its metadata is stood in for."""
    from types import SimpleNamespace

    from opwire.errors import KernelError
    from opwire.proxy_executor.outputs import check_span

    base = torch.zeros(4)
    check_span(base.as_strided((2,), (1,), 2), "node")  # inside: fine
    storage = SimpleNamespace(nbytes=lambda: 16)
    bad = SimpleNamespace(
        numel=lambda: 4, storage_offset=lambda: 2, shape=(4,), stride=lambda: (1,), element_size=lambda: 4,
        untyped_storage=lambda: storage,
    )  # fmt: skip
    with pytest.raises(KernelError, match=r"node: the kernel returned a view reaching element 5 of a storage of 4"):
        check_span(bad, "node")
