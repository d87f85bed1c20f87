"""ProxyExecutor.call / call_function against direct torch.ops calls, policies and error messages."""

from __future__ import annotations

import re
import threading
from typing import Any

import pytest
import torch

from opwire.proxy_executor import BindError, DefaultPolicy, KernelError, ProxyExecutor, UnknownTargetError
from opwire.schema import models as m

LIB = torch.library.Library("opwire_exec_test", "DEF")
LIB.define(
    'every(Tensor x, int n=2, float alpha=1.5, bool flag=True, str mode="sum", int[] dims=[0], '
    "Device? device=None, ScalarType? dtype=None, Tensor? bias=None, *, int k=3) -> Tensor"
)


def _every(x, n=2, alpha=1.5, flag=True, mode="sum", dims=(0,), device=None, dtype=None, bias=None, *, k=3):  # type: ignore[no-untyped-def]
    y = x * alpha + n + k + (1 if flag else 0) + len(mode) + sum(dims)
    y = y + bias if bias is not None else y
    return y.to(dtype=dtype or y.dtype, device=device or y.device)


LIB.impl("every", _every, "CompositeExplicitAutograd")
LIB.define("multi(Tensor x, SymInt[] sizes) -> (Tensor, Tensor[], int)")
LIB.impl("multi", lambda x, sizes: (x + 1, [x * s for s in sizes], len(sizes)), "CompositeExplicitAutograd")
LIB.define("stats(Tensor x) -> (float, bool, str, int[], Scalar)")
LIB.impl("stats", lambda x: (float(x.sum()), bool(x.numel() > 0), "ok", list(x.shape), 3), "CompositeExplicitAutograd")


def arg(**kw: Any) -> m.Argument:
    return m.Argument(**kw)


def t(name: str) -> m.Argument:
    return arg(as_tensor=m.TensorArgument(name=name))


def node(target: str, inputs: dict[str, m.Argument], outputs: list[m.Argument], name: str = "n0") -> m.Node:
    named = [m.NamedArgument(name=k, arg=v, kind=m.ArgumentKind.POSITIONAL) for k, v in inputs.items()]
    return m.Node(target=target, inputs=named, outputs=outputs, metadata={}, name=name)


X = torch.arange(6.0).reshape(2, 3)
Y = torch.ones(2, 3)


def test_add_matches_direct_call_and_binding_ignores_order() -> None:
    ex = ProxyExecutor()
    a = node("torch.ops.aten.add.Tensor", {"other": t("y"), "self": t("x"), "alpha": arg(as_int=2)}, [t("out")])
    assert torch.equal(ex.call(a, {"x": X, "y": Y})["out"], torch.ops.aten.add.Tensor(X, Y, alpha=2))
    b = node("aten::add.Tensor", {"self": t("x"), "other": t("y")}, [t("out")])
    assert torch.equal(ex.call(b, {"x": X, "y": Y})["out"], X + Y)


@pytest.mark.parametrize(
    ("target", "inputs", "expected"),
    [
        ("aten::sum.dim_IntList", {"self": t("x"), "dim": arg(as_ints=[]), "dtype": arg(as_scalar_type=m.ScalarType(7))},
         torch.ops.aten.sum.dim_IntList(X, [], dtype=torch.float32)),
        ("aten::zeros", {"size": arg(as_sym_ints=[m.SymIntArgument(as_name="s0"), m.SymIntArgument(as_int=3)]),
                         "dtype": arg(as_scalar_type=m.ScalarType(8)), "layout": arg(as_layout=m.Layout(7)),
                         "device": arg(as_device=m.Device(type="cpu"))}, torch.zeros(2, 3, dtype=torch.float64)),
        ("aten::clone", {"self": t("x"), "memory_format": arg(as_memory_format=m.MemoryFormat(1))}, X.clone()),
        ("aten::index.Tensor", {"self": t("x"), "indices": arg(as_optional_tensors=[
            m.OptionalTensorArgument(as_none=True), m.OptionalTensorArgument(as_tensor=m.TensorArgument(name="i"))])},
         X[:, torch.tensor([0, 2])]),
        ("aten::cat", {"tensors": arg(as_tensors=[m.TensorArgument(name="x"), m.TensorArgument(name="y")]),
                       "dim": arg(as_sym_int=m.SymIntArgument(as_name="s1"))}, torch.cat([X, Y], 1)),
        ("aten::add.Scalar", {"self": t("x"), "other": arg(as_complex=m.ComplexValue(real=1.0, imag=2.0))}, X + (1 + 2j)),
        ("aten::mul.Tensor", {"self": t("x"), "other": arg(as_sym_float=m.SymFloatArgument(as_name="f"))}, X * 0.5),
        ("aten::div.Tensor_mode", {"self": t("x"), "other": t("y"), "rounding_mode": arg(as_string="floor")},
         torch.div(X, Y, rounding_mode="floor")),
        ("aten::where.ScalarOther", {"condition": t("c"), "self": t("x"), "other": arg(as_float=float("-inf"))},
         torch.where(X > 2, X, float("-inf"))),
        ("aten::upsample_nearest2d.vec", {"input": t("x4"), "output_size": arg(as_none=True),
                                           "scale_factors": arg(as_floats=[2.0, 1.0])},
         torch.ops.aten.upsample_nearest2d.vec(X[None, None], None, [2.0, 1.0])),
        ("aten::_to_copy", {"self": t("x"), "dtype": arg(as_scalar_type=m.ScalarType(5)), "non_blocking": arg(as_bool=False)},
         X.to(torch.int64)),
    ],
)  # fmt: skip
def test_argument_kinds_match_direct_calls(target: str, inputs: dict[str, m.Argument], expected: torch.Tensor) -> None:
    values = {"x": X, "y": Y, "i": torch.tensor([0, 2]), "s0": 2, "s1": 1, "f": 0.5, "c": X > 2, "x4": X[None, None]}
    got = ProxyExecutor().call(node(target, inputs, [t("out")]), values)["out"]
    assert isinstance(got, torch.Tensor) and got.dtype == expected.dtype and torch.equal(got, expected)


def test_return_kinds() -> None:
    ex = ProxyExecutor()
    n = node("opwire_exec_test::multi", {"x": t("x"), "sizes": arg(as_ints=[2, 3])},
             [t("a"), arg(as_tensors=[m.TensorArgument(name="b0"), m.TensorArgument(name="b1")]), arg(as_int=2)])  # fmt: skip
    out = ex.call(n, {"x": X})
    assert set(out) == {"a", "b0", "b1"} and torch.equal(out["b1"], X * 3)
    sym = node("opwire_exec_test::multi", {"x": t("x"), "sizes": arg(as_ints=[4])},
               [t("a"), arg(as_tensors=[m.TensorArgument(name="b0")]), arg(as_sym_int=m.SymIntArgument(as_name="k"))])  # fmt: skip
    assert ex.call(sym, {"x": X})["k"] == 1
    stats = node(
        "opwire_exec_test::stats",
        {"x": t("x")},
        [arg(as_sym_float=m.SymFloatArgument(as_name="f")), arg(as_sym_bool=m.SymBoolArgument(as_name="b")),
         arg(as_string="ok"), arg(as_ints=[2, 3]), arg(as_sym_int=m.SymIntArgument(as_name="s"))],
    )  # fmt: skip
    assert ex.call(stats, {"x": X}) == {"f": 15.0, "b": True, "s": 3}
    size = node(
        "aten::sym_size.int", {"self": t("x"), "dim": arg(as_int=1)}, [arg(as_sym_int=m.SymIntArgument(as_name="d"))]
    )
    assert ex.call(size, {"x": X}) == {"d": 3}
    none = node("aten::_assert_async.msg", {"self": t("c"), "assert_msg": arg(as_string="x")}, [])
    assert ex.call(none, {"c": torch.tensor(True)}) == {}


def test_constant_output_mismatch_is_a_kernel_error() -> None:
    bad = node("opwire_exec_test::stats", {"x": t("x")}, [arg(as_float=1.0), arg(as_bool=True), arg(as_string="ok"),
               arg(as_ints=[2, 3]), arg(as_int=3)])  # fmt: skip
    with pytest.raises(KernelError) as info:
        ProxyExecutor().call(bad, {"x": X})
    assert str(info.value) == (
        "node 'n0' (opwire_exec_test::stats) output 0: expected the constant 1.0 recorded when the call was "
        "serialized, but the kernel returned float 15.0; the op no longer computes what was compiled in"
    )


def test_fixed_table_sym_arithmetic_and_getitem() -> None:
    ex = ProxyExecutor()
    add = node("_operator.add", {"a": arg(as_sym_int=m.SymIntArgument(as_name="s")), "b": arg(as_int=3)},
               [arg(as_sym_int=m.SymIntArgument(as_name="r"))])  # fmt: skip
    assert ex.call(add, {"s": 4}) == {"r": 7}
    mx = node("torch.sym_max", {"a": arg(as_int=2), "b": arg(as_sym_int=m.SymIntArgument(as_name="s"))},
              [arg(as_sym_int=m.SymIntArgument(as_name="r"))])  # fmt: skip
    assert ex.call(mx, {"s": 5}) == {"r": 5}
    with pytest.raises(UnknownTargetError, match="neither an operator"):
        ex.call(node("builtins.eval", {}, []), {})
    with pytest.raises(UnknownTargetError, match="higher-order op opwire does not run"):
        ex.call(node("torch.ops.higher_order.run_const_graph", {}, []), {})


EVERY = "opwire_exec_test::every"


def _every_node(**given: m.Argument) -> m.Node:
    return node(EVERY, {"x": t("x"), **given}, [t("out")])


def test_policies_with_omitted_defaults() -> None:
    n = _every_node(n=arg(as_int=5))
    assert torch.equal(ProxyExecutor(policy="from_schema").call(n, {"x": X})["out"], _every(X, 5))
    with pytest.raises(BindError) as info:
        ProxyExecutor(policy=DefaultPolicy.REQUIRE_SERIALIZED).call(n, {"x": X})
    assert str(info.value) == (
        "node 'n0' (opwire_exec_test::every): argument 'alpha' (float, schema default 1.5) is missing; policy "
        "REQUIRE_SERIALIZED needs every argument in the file; re-serialize it with the argument or choose FROM_SCHEMA"
    )
    caller = ProxyExecutor(policy="REQUIRE_CALLER")
    defaults = {"alpha": 0.5, "flag": False, "mode": "ab", "dims": [1], "device": None, "dtype": torch.float64,
                "bias": Y, "k": 1}  # fmt: skip
    got = caller.call(n, {"x": X}, defaults)["out"]
    assert got.dtype == torch.float64 and torch.equal(
        got, _every(X, 5, 0.5, False, "ab", [1], None, torch.float64, Y, k=1)
    )
    with pytest.raises(BindError) as info:
        caller.call(n, {"x": X}, {"alpha": 0.5})
    assert str(info.value) == (
        "node 'n0' (opwire_exec_test::every): argument 'flag' is not in the file and the caller did not pass it; "
        "policy REQUIRE_CALLER needs it in defaults= (or choose FROM_SCHEMA to use the schema default)"
    )
    full = _every_node(**{k: arg(as_int=1) if k in ("n", "k") else arg(as_none=True) for k in
                          ("n", "device", "dtype", "bias", "k")}, alpha=arg(as_float=1.0), flag=arg(as_bool=True),
                       mode=arg(as_string="s"), dims=arg(as_ints=[]))  # fmt: skip
    got = ProxyExecutor(policy="require_serialized").call(full, {"x": X})["out"]
    assert torch.equal(got, _every(X, 1, 1.0, True, "s", [], k=1))


@pytest.mark.parametrize(
    ("n", "message"),
    [
        (_every_node(nope=arg(as_int=1)),
         "node 'n0' (opwire_exec_test::every): unknown argument 'nope'; the schema's arguments are x, n, alpha, flag, "
         "mode, dims, device, dtype, bias, k"),
        (node(EVERY, {"n": arg(as_int=1)}, [t("out")]),
         "node 'n0' (opwire_exec_test::every): required argument 'x' (Tensor) is missing and has no default"),
        (_every_node(n=arg(as_float=1.0)),
         "node 'n0' (opwire_exec_test::every): argument 'n' of type int cannot be carried by as_float; expected "
         "as_int or as_sym_int"),
        (_every_node(dtype=arg(as_scalar_type=m.ScalarType(0))),
         "node 'n0' (opwire_exec_test::every) argument 'dtype': ScalarType 0 (UNKNOWN) names no torch ScalarType; "
         "expected one of 1 (BYTE), 2 (CHAR), 3 (SHORT), 4 (INT), 5 (LONG), 6 (HALF), 7 (FLOAT), 8 (DOUBLE), "
         "9 (COMPLEXHALF), 10 (COMPLEXFLOAT), 11 (COMPLEXDOUBLE), 12 (BOOL), 13 (BFLOAT16), 28 (UINT16), "
         "29 (FLOAT8E4M3FN), 30 (FLOAT8E5M2), 31 (FLOAT8E4M3FNUZ), 32 (FLOAT8E5M2FNUZ), 33 (FLOAT8E8M0FNU), "
         "34 (UINT32), 35 (UINT64); rewrite the file with a concrete value"),
        (_every_node(device=arg(as_device=m.Device(type="nosuchdev"))),
         "node 'n0' (opwire_exec_test::every) argument 'device': device 'nosuchdev' is not a device this torch "
         "knows"),
        (node(EVERY, {"x": t("x")}, [t("a"), t("b")]),
         "node 'n0' (opwire_exec_test::every): the file has 2 outputs but the schema returns 1 values"),
        (node("opwire_nolib::op", {}, []),
         "target 'opwire_nolib::op': no operator opwire_nolib::op.default is registered; load the library that "
         "defines namespace 'opwire_nolib' first (import its Python package or "
         "torch.ops.load_library('libopwire_nolib.so'))"),
    ],
)  # fmt: skip
def test_bind_errors_have_full_messages(n: m.Node, message: str) -> None:
    with pytest.raises(BindError) as info:
        ProxyExecutor().call(n, {"x": X})
    assert str(info.value).startswith(message)


def test_duplicate_names_missing_values_and_kernel_errors() -> None:
    dup = m.Node(target=EVERY, inputs=[m.NamedArgument(name="x", arg=t("x")), m.NamedArgument(name="x", arg=t("y"))],
                 outputs=[t("o")], metadata={})  # fmt: skip
    with pytest.raises(BindError, match=r"^node \(opwire_exec_test::every\): argument 'x' is given twice"):
        ProxyExecutor().call(dup, {"x": X})
    with pytest.raises(BindError, match="refers to value 'x', which the values do not hold"):
        ProxyExecutor().call(_every_node(), {})
    bad = node("aten::add.Tensor", {"self": t("x"), "other": t("z")}, [t("o")])
    with pytest.raises(KernelError, match=r"^node 'n0' \(aten::add.Tensor\): the kernel raised RuntimeError: The size"):
        ProxyExecutor().call(bad, {"x": X, "z": torch.ones(5)})


def _extern() -> m.ExternKernelNodes:
    first = node(EVERY, {"x": t("x"), "n": arg(as_int=3), "dims": arg(as_ints=[1, 0]), "bias": t("b"),
                         "k": arg(as_int=4), "mode": arg(as_string="mean")}, [t("buf1")], name="e0")  # fmt: skip
    second = node("opwire_exec_test::multi", {"sizes": arg(as_ints=[2, 3]), "x": t("buf1")},
                  [t("buf3"), arg(as_tensors=[m.TensorArgument(name="buf4"), m.TensorArgument(name="buf5")]),
                   arg(as_int=2)], name="e1")  # fmt: skip
    return m.ExternKernelNodes(nodes=[m.ExternKernelNode(name="buf0", node=first),
                                      m.ExternKernelNode(name="buf2", node=second)])  # fmt: skip


def test_call_function_convention_and_checks() -> None:
    ex = ProxyExecutor(_extern())
    assert ex.layout(0) == "int_args (4): n, dims[2], k; tensor_args (3): x, bias, <out 0>"
    slots: list[Any] = [X, Y, None]
    outs = ex.call_function(0, [3, 1, 0, 4], slots)
    expected = _every(X, 3, mode="mean", dims=[1, 0], bias=Y, k=4)
    assert torch.equal(outs[0], expected) and slots[2] is outs[0]
    slots2: list[Any] = [expected, None, None, None]
    outs2 = ex.call_function("buf2", [2, 3, 2], slots2)
    assert torch.equal(slots2[3], expected * 3) and len(outs2) == 3
    cases = [
        ((0, [3, 1, 0], [X, Y, None]), "expected 4 ints and 3 tensors"),
        ((0, [3, 1, 0, 4, 5], [X, Y, None]), "expected 4 ints and 3 tensors"),
        ((0, [3, 1, 0, 4], [X, None]), "expected 4 ints and 3 tensors"),
        ((0, [3, 1.5, 0, 4], [X, Y, None]), "int_args[1] is float 1.5, expected an int"),
        ((0, [3, 1, 0, 4], [X, "y", None]), "tensor_args[1] is str, expected a tensor"),
        ((-1, [], []), "extern node index -1 is out of range: the file has 2 nodes"),
        ((2, [], []), "extern node index 2 is out of range"),
        (("buf9", [], []), "no extern node named 'buf9'; the file has buf0, buf2"),
        ((True, [], []), "expected an extern node index or name, got bool"),
    ]
    for (idx, ints, tensors), message in cases:
        with pytest.raises(BindError, match=message.replace("[", r"\[").replace("(", r"\(")):
            ex.call_function(idx, ints, tensors)  # type: ignore[arg-type]
    with pytest.raises(KernelError, match="expected the constant 5"):
        ex.call_function(1, [2, 3, 5], [expected, None, None, None])


def test_call_function_require_caller_takes_missing_ints_and_tensors_from_arrays() -> None:
    n = node(EVERY, {"x": t("x"), "alpha": arg(as_float=1.0), "flag": arg(as_bool=True), "mode": arg(as_string="m"),
                     "dims": arg(as_ints=[]), "device": arg(as_none=True), "dtype": arg(as_none=True)},
             [t("o")])  # fmt: skip
    ex = ProxyExecutor(m.ExternKernelNodes(nodes=[m.ExternKernelNode(name="b", node=n)]), policy="require_caller")
    assert ex.layout(0) == "int_args (2): n, dims[0], k; tensor_args (3): x, bias, <out 0>"
    out = ex.call_function(0, [7, 1], [X, Y, None])
    assert torch.equal(out[0], _every(X, 7, 1.0, True, "m", [], bias=Y, k=1))
    with pytest.raises(BindError, match="under policy REQUIRE_CALLER only int, SymInt and Tensor"):
        ProxyExecutor(m.ExternKernelNodes(nodes=[m.ExternKernelNode(name="b", node=_every_node())]),
                      policy="require_caller").call_function(0, [], [])  # fmt: skip


def test_plans_are_cached_and_thread_safe() -> None:
    ex = ProxyExecutor()
    n = node("aten::add.Tensor", {"self": t("x"), "other": t("y")}, [t("out")])
    assert ex.plan(n) is ex.plan(n)
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(200):
                assert torch.equal(ex.call(n, {"x": X, "y": Y})["out"], X + Y)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors


def test_unknown_policy() -> None:
    with pytest.raises(BindError, match="unknown default policy 'lenient': expected one of require_serialized"):
        ProxyExecutor(policy="lenient")


@pytest.mark.parametrize("with_alpha", [False, True])
def test_call_function_fast_path_keeps_every_check(with_alpha: bool) -> None:
    """Nodes with only tensor/int/constant inputs take a precomputed path; bad arrays still get the same errors."""
    inputs = {"self": t("x"), "other": t("y")} | ({"alpha": arg(as_int=3)} if with_alpha else {})
    n = node("aten::add.Tensor", inputs, [t("out")])
    ex = ProxyExecutor(m.ExternKernelNodes(nodes=[m.ExternKernelNode(name="buf0", node=n)]))
    ints = [3] if with_alpha else []
    slots: list[Any] = [X, Y, None]
    (out,) = ex.call_function(0, ints, slots)
    assert slots[2] is out and torch.equal(out, X + Y * (3 if with_alpha else 1))
    n_ints = len(ints)
    cases = [
        ((ints, [X, None]), f"expected {n_ints} ints and 3 tensors"),
        ((ints, [X, "y", None]), "tensor_args[1] is str, expected a tensor"),
        (([*ints, 1], [X, Y, None]), f"expected {n_ints} ints and 3 tensors"),
    ]
    if with_alpha:
        cases.append((([True], [X, Y, None]), "int_args[0] is bool True, expected an int"))
    for (i, ts), message in cases:
        with pytest.raises(BindError, match=message.replace("[", r"\[")):
            ex.call_function(0, i, ts)
    with pytest.raises(KernelError, match="the kernel raised RuntimeError"):
        ex.call_function(0, ints, [X, torch.ones(5, 7), None])


def test_an_executor_without_extern_nodes_is_still_truthy() -> None:
    ex = ProxyExecutor()
    assert len(ex) == 0 and bool(ex)


def test_int_lists_take_the_fast_path_with_every_check() -> None:
    """conv2d's stride/padding/dilation come from int_args on the precomputed path; bad arrays get the same errors."""
    img, w = torch.randn(1, 3, 8, 8), torch.randn(4, 3, 3, 3)
    inputs = {"input": t("img"), "weight": t("w"), "bias": arg(as_none=True), "stride": arg(as_ints=[1, 1]),
              "padding": arg(as_ints=[1, 1]), "dilation": arg(as_ints=[1, 1]), "groups": arg(as_int=1)}  # fmt: skip
    ek = m.ExternKernelNode(name="buf0", node=node("aten::conv2d", inputs, [t("out")]))
    ex = ProxyExecutor(m.ExternKernelNodes(nodes=[ek]))
    assert ex._flat_plan(0).fast is not None
    slots: list[Any] = [img, w, None]
    (out,) = ex.call_function(0, [2, 2, 1, 1, 1, 1, 1], slots)
    assert slots[2] is out and torch.equal(out, torch.ops.aten.conv2d(img, w, None, [2, 2], [1, 1], [1, 1], 1))
    for ints, tensors, message in [
        ([2, 2.0, 1, 1, 1, 1, 1], [img, w, None], "int_args[1] is float 2.0, expected an int"),
        ([2, 2, 1, 1, 1, 1, True], [img, w, None], "int_args[6] is bool True, expected an int"),
        ([2, 2, 1, 1, 1, 1], [img, w, None], "expected 7 ints and 3 tensors"),
        ([2, 2, 1, 1, 1, 1, 1], (img, w, None), "expected int_args as a sequence and tensor_args as a mutable list"),
    ]:
        with pytest.raises(BindError, match=re.escape(message)):
            ex.call_function(0, ints, tensors)  # type: ignore[arg-type]
    with pytest.raises(KernelError, match="the kernel raised RuntimeError"):
        ex.call_function(0, [1, 1, 1, 1, 1, 1, 1], [img, torch.randn(4, 5, 3, 3), None])
    ek.node.inputs[-1].arg = arg(as_int=3)  # an edit: groups=3 is bound again before the next call
    with pytest.raises(KernelError, match="the kernel raised RuntimeError"):
        ex.call_function(0, [1, 1, 1, 1, 1, 1, 3], [img, w, None])
    assert ex.call(0, {"img": img, "w": torch.randn(3, 1, 3, 3)})["out"].shape == (1, 3, 8, 8)
