"""Hostile files for the commands that execute: each case builds its file from a description of the attack.

The decoding table (tests/support/hostile.py) has the same shape. A case names the command (`exec`, `run`,
`replay`), builds its files under a temporary directory and returns the command line after the command
name; running it must print one line on stderr (no traceback), exit with `code`, match `stderr`, and
leave `absent` (a path the attack would create) uncreated.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

import opwire
from opwire.schema import models as m
from opwire.serde import torch_bridge
from opwire.serde.tensors import from_tensor

Build = Callable[[Path], list[str]]


@dataclass(frozen=True)
class Case:
    """One hostile input for an executing command."""

    name: str
    command: str
    build: Build
    code: int
    stderr: str
    """A regular expression the single stderr line must match."""
    absent: str | None = None
    """A file name (under the case's directory) that must not exist afterwards."""
    extra: list[str] = field(default_factory=list)


# ------------------------------------------------------------------------------------------ nodes
def t(name: str) -> m.Argument:
    """A tensor argument naming `name`."""
    return m.Argument(as_tensor=m.TensorArgument(name=name))


def node(target: str, inputs: dict[str, m.Argument], out: str | m.Argument) -> m.Node:
    """A graph node calling `target` with named inputs and one output."""
    named = [m.NamedArgument(name=k, arg=v) for k, v in inputs.items()]
    return m.Node(target=target, inputs=named, outputs=[t(out) if isinstance(out, str) else out], metadata={})


def from_file_nodes(path: str, shared: bool, size: int = 16) -> list[m.Node]:
    """`aten::from_file(path, shared, size, dtype=uint8)`, then `select(0, 0).fill_(65)`: writes 'A' into the file."""
    return [
        node(
            "aten::from_file",
            {
                "filename": m.Argument(as_string=path),
                "shared": m.Argument(as_bool=shared),
                "size": m.Argument(as_int=size),
                "dtype": m.Argument(as_scalar_type=m.ScalarType.BYTE),
            },
            "mapped",
        ),
        node(
            "aten::select.int", {"self": t("mapped"), "dim": m.Argument(as_int=0), "index": m.Argument(as_int=0)}, "b0"
        ),
        node("aten::fill_.Scalar", {"self": t("b0"), "value": m.Argument(as_int=65)}, "filled"),
        node("aten::add.Tensor", {"self": t("mapped"), "other": t("x")}, "out"),
    ]


def bad_csr_nodes() -> list[m.Node]:
    """`full` + `select`/`fill_` make crow_indices [0, 10**6, 4], then `_sparse_csr_tensor_unsafe` + `_to_dense`."""
    ints = lambda *v: m.Argument(as_ints=list(v))  # noqa: E731
    i = lambda v: m.Argument(as_int=v)  # noqa: E731
    long = m.Argument(as_scalar_type=m.ScalarType.LONG)
    return [
        node("aten::full", {"size": ints(3), "fill_value": i(0), "dtype": long}, "crow"),
        node("aten::select.int", {"self": t("crow"), "dim": i(0), "index": i(1)}, "c1"),
        node("aten::fill_.Scalar", {"self": t("c1"), "value": i(10**6)}, "c1f"),
        node("aten::select.int", {"self": t("crow"), "dim": i(0), "index": i(2)}, "c2"),
        node("aten::fill_.Scalar", {"self": t("c2"), "value": i(4)}, "c2f"),
        node("aten::full", {"size": ints(4), "fill_value": i(1), "dtype": long}, "col"),
        node("aten::full", {"size": ints(4), "fill_value": m.Argument(as_float=1.0)}, "vals"),
        node(
            "aten::_sparse_csr_tensor_unsafe",
            {"crow_indices": t("crow"), "col_indices": t("col"), "values": t("vals"), "size": ints(2, 2)},
            "csr",
        ),
        node("aten::_to_dense", {"self": t("csr")}, "dense"),
        node("aten::add.Tensor", {"self": t("dense"), "other": t("x")}, "out"),
    ]


def sym_node(fn: str, a: int, b: int) -> list[m.Node]:
    """One symbolic-arithmetic node `fn(a, b)` of the fixed table, then a tensor op using the result."""
    out = m.Argument(as_sym_int=m.SymIntArgument(as_name="s"))
    return [
        node(fn, {"a": m.Argument(as_int=a), "b": m.Argument(as_int=b)}, out),
        node(
            "aten::add.Tensor", {"self": t("x"), "other": m.Argument(as_sym_int=m.SymIntArgument(as_name="s"))}, "out"
        ),
    ]


def with_effects_from_file(path: str) -> list[m.Node]:
    """`with_effects(token, aten::from_file.default, path, ...)`: the op reached as an `as_operator` argument."""
    return [
        m.Node(
            target="torch.ops.higher_order.with_effects",
            inputs=[
                m.NamedArgument(name="", arg=t("x")),  # the token: binding refuses the op before any value is read
                m.NamedArgument(name="", arg=m.Argument(as_operator="aten::from_file.default")),
                m.NamedArgument(name="", arg=m.Argument(as_string=path)),
                m.NamedArgument(name="shared", arg=m.Argument(as_bool=True)),
                m.NamedArgument(name="size", arg=m.Argument(as_int=16)),
            ],
            outputs=[t("tok2"), t("mapped")],
            metadata={},
        ),
        node("aten::add.Tensor", {"self": t("mapped"), "other": t("x")}, "out"),
    ]


def _i(v: int) -> m.Argument:
    return m.Argument(as_int=v)


def _ints(*v: int) -> m.Argument:
    return m.Argument(as_ints=list(v))


def _ts(*names: str) -> m.Argument:
    return m.Argument(as_tensors=[m.TensorArgument(name=n) for n in names])


_F = {"lr": m.Argument(as_float=0.1), "weight_decay": m.Argument(as_float=0.0), "eps": m.Argument(as_float=1e-8),
      "maximize": m.Argument(as_bool=False)}  # fmt: skip

ISSUE_ATTACKS: dict[str, tuple[str, list[m.Node]]] = {
    "_reshape_alias past the storage, then fill_ (heap overflow write)": (
        "aten::_reshape_alias",
        [
            node("aten::_reshape_alias", {"self": t("x"), "size": _ints(2**24), "stride": _ints(1)}, "big"),
            node("aten::fill_.Scalar", {"self": t("big"), "value": _i(7)}, "out"),
        ],
    ),
    "inductor::resize_storage_bytes_ then sum (use after free)": (
        "inductor::resize_storage_bytes_",
        [
            m.Node(
                target="inductor::resize_storage_bytes_",
                inputs=[m.NamedArgument(name="variable", arg=t("x")), m.NamedArgument(name="new_size", arg=_i(0))],
                outputs=[],
                metadata={},
            ),
            node("aten::sum", {"self": t("x")}, "out"),
        ],
    ),
    "_convert_indices_from_coo_to_csr": (
        "aten::_convert_indices_from_coo_to_csr",
        [node("aten::_convert_indices_from_coo_to_csr", {"self": t("x"), "size": _i(2**40)}, "out")],
    ),
    "_convert_indices_from_csr_to_coo": (
        "aten::_convert_indices_from_csr_to_coo",
        [node("aten::_convert_indices_from_csr_to_coo", {"crow_indices": t("x"), "col_indices": t("x")}, "out")],
    ),
    "_cummax_helper": (
        "aten::_cummax_helper",
        [
            m.Node(
                target="aten::_cummax_helper",
                inputs=[
                    m.NamedArgument(name=k, arg=v)
                    for k, v in {"self": t("x"), "values": t("x"), "indices": t("x"), "dim": _i(0)}.items()
                ],
                outputs=[],
                metadata={},
            )
        ],
    ),
    "_cummin_helper": (
        "aten::_cummin_helper",
        [
            m.Node(
                target="aten::_cummin_helper",
                inputs=[
                    m.NamedArgument(name=k, arg=v)
                    for k, v in {"self": t("x"), "values": t("x"), "indices": t("x"), "dim": _i(0)}.items()
                ],
                outputs=[],
                metadata={},
            )
        ],
    ),
    "_indices -> fill_(1e9) -> _to_dense": (
        "aten::_indices",
        [
            node("aten::_indices", {"self": t("x")}, "idx"),
            node("aten::fill_.Scalar", {"self": t("idx"), "value": _i(10**9)}, "f"),
            node("aten::_to_dense", {"self": t("x")}, "out"),
        ],
    ),
    "manual_seed reseeds the host's generator": (
        "aten::manual_seed",
        [
            m.Node(
                target="aten::manual_seed", inputs=[m.NamedArgument(name="seed", arg=_i(1234))], outputs=[], metadata={}
            )
        ],
    ),
    "set_grad_enabled(False) leaves autograd off": (
        "aten::set_grad_enabled",
        [
            m.Node(
                target="aten::set_grad_enabled",
                inputs=[m.NamedArgument(name="val", arg=m.Argument(as_bool=False))],
                outputs=[],
                metadata={},
            )
        ],
    ),
}
"""The execution attacks of issue 16 that the op policy refuses at bind: name -> (the refused op, the nodes)."""

CHECKED_ATTACKS: dict[str, tuple[str, list[m.Node]]] = {
    "segment_reduce(lengths=[1e8], unsafe=True)": (
        "aten::segment_reduce",
        [
            node(
                "aten::segment_reduce",
                {
                    "data": t("x"),
                    "reduce": m.Argument(as_string="sum"),
                    "lengths": t("x"),
                    "unsafe": m.Argument(as_bool=True),
                },
                "out",
            )
        ],
    ),
    "max_pool2d_with_indices_backward with indices=1e8": (
        "aten::max_pool2d_with_indices_backward",
        [
            node(
                "aten::max_pool2d_with_indices_backward",
                {
                    "grad_output": t("x"),
                    "self": t("x"),
                    "kernel_size": _ints(1, 1),
                    "stride": _ints(1, 1),
                    "padding": _ints(0, 0),
                    "dilation": _ints(1, 1),
                    "ceil_mode": m.Argument(as_bool=False),
                    "indices": t("x"),
                },
                "out",
            )
        ],
    ),
    "_fused_adam_ with mismatched sizes": (
        "aten::_fused_adam_",
        [
            m.Node(
                target="aten::_fused_adam_",
                inputs=[
                    m.NamedArgument(name=k, arg=v)
                    for k, v in {
                        "self": _ts("x"),
                        "grads": _ts("x", "x"),
                        "exp_avgs": _ts(),
                        "exp_avg_sqs": _ts(),
                        "max_exp_avg_sqs": _ts(),
                        "state_steps": _ts(),
                        "beta1": m.Argument(as_float=0.9),
                        "beta2": m.Argument(as_float=0.99),
                        "amsgrad": m.Argument(as_bool=False),
                        **_F,
                    }.items()
                ],
                outputs=[],
                metadata={},
            )
        ],
    ),
    "_fused_adagrad_ with mismatched sizes": (
        "aten::_fused_adagrad_",
        [
            m.Node(
                target="aten::_fused_adagrad_",
                inputs=[
                    m.NamedArgument(name=k, arg=v)
                    for k, v in {
                        "self": _ts("x"),
                        "grads": _ts("x", "x"),
                        "state_sums": _ts(),
                        "state_steps": _ts(),
                        "lr_decay": m.Argument(as_float=0.0),
                        **_F,
                    }.items()
                ],
                outputs=[],
                metadata={},
            )
        ],
    ),
    "add.out into a wrong-shaped out (a kernel warning on stderr)": (
        "aten::add.out",
        [node("aten::add.out", {"self": t("x"), "other": t("x"), "out": t("x")}, "out")],
    ),
}
"""Attacks of issue 16 on ops the policy admits since issue 25 (real work runs them): each fails its family's
precondition or a refused argument value before the kernel runs (add.out: the kernel's warning is re-issued)."""


def ones_nodes(n: int) -> list[m.Node]:
    """`aten::ones([n])` then an add: a small file asking for n floats."""
    return [
        node("aten::ones", {"size": _ints(n)}, "big"),
        node("aten::add.Tensor", {"self": t("big"), "other": t("x")}, "out"),
    ]


def sym_string_mul() -> list[m.Node]:
    """`_operator.mul("A", 3*10**9)` stored under an as_sym_int: a 3 GB string if computed."""
    out = m.Argument(as_sym_int=m.SymIntArgument(as_name="s"))
    return [
        node("_operator.mul", {"a": m.Argument(as_string="A"), "b": _i(3 * 10**9)}, out),
        node(
            "aten::add.Tensor", {"self": t("x"), "other": m.Argument(as_sym_int=m.SymIntArgument(as_name="s"))}, "out"
        ),
    ]


def write_input_nodes() -> list[m.Node]:
    """`select(x, 0, 0).fill_(9)`: writes into the caller's input through a view (the signature declares nothing)."""
    return [
        node("aten::select.int", {"self": t("x"), "dim": _i(0), "index": _i(0)}, "x0"),
        node("aten::fill_.Scalar", {"self": t("x0"), "value": _i(9)}, "f"),
        node("aten::add.Tensor", {"self": t("x"), "other": t("x")}, "out"),
    ]


def nested_while(outer: int, inner: int) -> m.OpwireArchive:
    """An exported pair of nested while_loops running outer * inner inner iterations."""
    from torch._higher_order_ops.while_loop import while_loop

    class _Nested(torch.nn.Module):
        def forward(self, i: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            def body(i: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
                _, y = while_loop(lambda j, y: j < inner, lambda j, y: (j + 1, y + 1.0), (torch.zeros_like(i), x))
                return i + 1, y

            return while_loop(lambda i, x: i < outer, body, (i, x))  # type: ignore[no-any-return]

    return torch_bridge.archive_from_exported_program(torch.export.export(_Nested(), (torch.tensor(0), torch.zeros(3))))


# ------------------------------------------------------------------------------------------ files
@functools.cache
def _add_one() -> m.OpwireArchive:
    """`x + 1` over 16 floats, exported once per process (`program` edits deep copies of it)."""

    class _Add(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + 1

    return torch_bridge.archive_from_exported_program(torch.export.export(_Add(), (torch.ones(16),)))


def program(nodes: list[m.Node], out: str = "out") -> m.OpwireArchive:
    """An archive whose program takes one tensor `x`, runs `nodes` and returns tensor `out`."""
    archive = _add_one().model_copy(deep=True)
    gm = archive.program.graph_module
    x_name = gm.signature.input_specs[0].value.arg.value.name
    for n in nodes:
        for na in n.inputs:
            if na.arg.type == "as_tensor" and na.arg.value.name == "x":
                na.arg = t(x_name)
    gm.graph.nodes = nodes
    gm.graph.outputs = [t(out)]
    gm.signature.output_specs[0].value.arg = t(out)
    return archive


@functools.cache
def _counting_loop() -> m.OpwireArchive:
    """A while_loop counting `i` up to 5, exported once per process (`while_forever` edits deep copies of it)."""
    from torch._higher_order_ops.while_loop import while_loop

    class _While(torch.nn.Module):
        def forward(self, i: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return while_loop(lambda i, x: i < 5, lambda i, x: (i + 1, x + 1.0), (i, x))  # type: ignore[no-any-return]

    return torch_bridge.archive_from_exported_program(torch.export.export(_While(), (torch.tensor(0), torch.zeros(3))))


def while_forever() -> m.OpwireArchive:
    """An exported while_loop whose condition was edited to `i >= 0`: it never turns false."""
    archive = _counting_loop().model_copy(deep=True)
    loop = archive.program.graph_module.graph.nodes[0]
    cond = loop.inputs[0].arg.value.graph.nodes[0]
    cond.target = "torch.ops.aten.ge.Scalar"
    cond.inputs[1].arg = m.Argument(as_int=0)
    return archive


def write_values(path: Path, **tensors: torch.Tensor) -> str:
    """A Values file holding `tensors` by name."""
    path.write_bytes(opwire.dumps(m.Values(values={k: m.Value(as_tensor=from_tensor(v)) for k, v in tensors.items()})))
    return str(path)


def run_case(nodes: Callable[[Path], list[m.Node]], *flags: str) -> Build:
    """`run PROGRAM --inputs VALUES` over a program made of `nodes(dir)`."""

    def build(d: Path) -> list[str]:
        (d / "prog.opw").write_bytes(opwire.dumps(program(nodes(d)), "compact"))
        return [str(d / "prog.opw"), "--inputs", write_values(d / "in.json", x=torch.ones(16)), *flags]

    return build


def exec_case(nodes: Callable[[Path], list[m.Node]]) -> Build:
    """`exec NODES --inputs VALUES` over an extern-node file of `nodes(dir)`."""

    def build(d: Path) -> list[str]:
        ek = m.ExternKernelNodes(nodes=[m.ExternKernelNode(name=f"buf{i}", node=n) for i, n in enumerate(nodes(d))])
        (d / "nodes.json").write_bytes(opwire.dumps(ek))
        return [str(d / "nodes.json"), "--inputs", write_values(d / "in.json", x=torch.ones(16))]

    return build


def trace_case(nodes: Callable[[Path], list[m.Node]]) -> Build:
    """`replay --chained TRACE` over a trace whose records are `nodes(dir)` (x is in its tensor table)."""

    def build(d: Path) -> list[str]:
        x = torch.ones(16)
        with opwire.record() as trace:
            torch.ops.aten.add.Tensor(x, x)
        model = trace.model.model_copy(deep=True)
        x_name = next(n for n in model.tensors if n.split("#")[0] == model.records[0].inputs[0].arg.value.name)
        records = []
        for n in nodes(d):
            for na in n.inputs:
                if na.arg.type == "as_tensor" and na.arg.value.name == "x":
                    na.arg = t(x_name)
            records.append(m.CallRecord(target=n.target, inputs=n.inputs, outputs=n.outputs, metadata={}))
        model.records = records
        (d / "trace.json").write_bytes(opwire.dumps(model))
        return [str(d / "trace.json"), "--chained"]

    return build


def _written(d: Path) -> list[m.Node]:
    return from_file_nodes(str(d / "written.pth"), shared=True)


REFUSED = r"op aten::from_file(\.default)? is refused by opwire's execution policy: it opens the file .*--allow-op"

CASES: list[Case] = [
    Case("from_file shared, program", "run", run_case(_written), 1, REFUSED, "written.pth"),
    Case("from_file shared, extern nodes", "exec", exec_case(_written), 2, REFUSED, "written.pth"),
    Case("from_file shared, chained trace", "replay", trace_case(_written), 2, REFUSED, "written.pth"),
    Case(
        "from_file reading /etc/hostname into run --out",
        "run",
        lambda d: [
            *run_case(lambda _: from_file_nodes("/etc/hostname", shared=False, size=4))(d),
            "--out",
            str(d / "o"),
        ],
        1,
        REFUSED,
        "o",
    ),
    Case(
        "from_file as with_effects' as_operator",
        "run",
        run_case(lambda d: with_effects_from_file(str(d / "written.pth"))),
        1,
        r"op aten::from_file is refused by opwire's execution policy",
        "written.pth",
    ),
    Case(
        "bad CSR indices into _sparse_csr_tensor_unsafe + _to_dense",
        "exec",
        exec_case(lambda _: bad_csr_nodes()),
        2,
        r"op aten::_sparse_csr_tensor_unsafe is refused .* without checking them",
    ),
    Case(
        "bad CSR indices, program",
        "run",
        run_case(lambda _: bad_csr_nodes()),
        1,
        r"op aten::_sparse_csr_tensor_unsafe is refused",
    ),
    Case(
        "_operator.pow(3, 10**9)",
        "run",
        run_case(lambda _: sym_node("_operator.pow", 3, 10**9)),
        1,
        r"symbolic arithmetic pow\(3, 1000000000\) would have about 1\.58e\+09 bits, outside a SymInt's 64-bit range",
    ),
    Case(
        "_operator.lshift(1, 2**34)",
        "run",
        run_case(lambda _: sym_node("_operator.lshift", 1, 2**34)),
        1,
        r"symbolic arithmetic lshift\(1, 17179869184\) would have 17179869185 bits",
    ),
    Case(
        "_operator.mul past i64",
        "run",
        run_case(lambda _: sym_node("_operator.mul", 2**62, 2**62)),
        1,
        r"symbolic arithmetic mul\(4611686018427387904, 4611686018427387904\) gives a 125-bit integer",
    ),
    Case(
        "while_loop whose condition never turns false",
        "run",
        lambda d: _while_build(d, "--max-while-iterations", "2000"),
        1,
        r"while_loop ran 2000 iterations in this run .*still true; .*--max-while-iterations N",
    ),
    Case(
        "while_loop past the wall time",
        "run",
        lambda d: _while_build(d, "--max-while-iterations", "100000000", "--timeout", "0.5"),
        1,
        r"exceeded its wall-time budget of 0\.5 s .*--timeout SECONDS",
    ),
]


def _attack_case(i: int, name: str) -> Case:
    """A row of ISSUE_ATTACKS, spread over the three executing commands."""
    op, nodes = ISSUE_ATTACKS[name]
    command = ("exec", "run", "replay")[i % 3]
    build = {"exec": exec_case, "run": run_case, "replay": trace_case}[command](lambda _, n=nodes: n)
    code = 1 if command == "run" else 2
    return Case(
        name, command, build, code, rf"op {re.escape(op)}(\.\w+)? is refused by opwire's execution policy.*--allow-op"
    )


CASES += [_attack_case(i, name) for i, name in enumerate(ISSUE_ATTACKS)]
CASES += [
    Case(
        f"{name}: its precondition, before the kernel",
        "run",
        run_case(lambda _, n=CHECKED_ATTACKS[name][1]: n),
        1,
        r"refused before the kernel ran: ",
    )
    for name in ("max_pool2d_with_indices_backward with indices=1e8", "_fused_adam_ with mismatched sizes")
]
CASES += [
    Case(
        "segment_reduce allowed by name, unsafe=True still refused",
        "exec",
        lambda d: [
            *exec_case(lambda _: CHECKED_ATTACKS["segment_reduce(lengths=[1e8], unsafe=True)"][1])(d),
            "--allow-op",
            "aten::segment_reduce",
        ],
        2,
        r"argument 'unsafe': unsafe=True asks the kernel to skip its bounds checks",
    ),
    Case(
        "aten::ones([3*2**28]) in a tiny extern file",
        "exec",
        exec_case(lambda _: ones_nodes(3 * 2**28)),
        1,
        r"outputs would take 3,221,225,472 bytes, over the execution-memory budget .*max_memory=BYTES",
    ),
    Case(
        "_operator.mul('A', 3*10**9)",
        "run",
        run_case(lambda _: sym_string_mul()),
        1,
        r"argument 'a' is as_string; symbolic arithmetic takes int, float, bool or SymInt operands",
    ),
    Case(
        "nested while_loops each under the bound",
        "run",
        lambda d: _nested_build(d, "--max-while-iterations", "60"),
        1,
        r"while_loop ran 60 iterations in this run \(counted across every loop and nesting\)",
    ),
]


def _nested_build(d: Path, *flags: str) -> list[str]:
    (d / "nested.opw").write_bytes(opwire.dumps(nested_while(10, 10), "compact"))
    values = write_values(d / "in.json", i=torch.tensor(0), x=torch.zeros(3))
    return [str(d / "nested.opw"), "--inputs", values, *flags]


def _while_build(d: Path, *flags: str) -> list[str]:
    (d / "loop.opw").write_bytes(opwire.dumps(while_forever(), "compact"))
    values = write_values(d / "in.json", i=torch.tensor(0), x=torch.zeros(3))
    return [str(d / "loop.opw"), "--inputs", values, *flags]
