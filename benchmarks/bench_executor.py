"""Median per-call time of ProxyExecutor.call / call_function (plans built) against direct torch.ops calls."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from opwire.proxy_executor import ProxyExecutor
from opwire.schema import models as m

LIB = torch.library.Library("opwire_bench", "DEF")
LIB.define("scale(Tensor x, float alpha=2.0, int n=1) -> Tensor")
LIB.impl("scale", lambda x, alpha=2.0, n=1: x * alpha + n, "CompositeExplicitAutograd")


def _median_us(fn: Callable[[], Any], repeat: int = 7, number: int = 2000) -> float:
    fn()
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        runs.append((time.perf_counter() - start) / number * 1e6)
    return statistics.median(runs)


def _t(name: str) -> m.Argument:
    return m.Argument(as_tensor=m.TensorArgument(name=name))


def _node(target: str, inputs: dict[str, m.Argument]) -> m.Node:
    named = [m.NamedArgument(name=k, arg=v) for k, v in inputs.items()]
    return m.Node(target=target, inputs=named, outputs=[_t("out")], metadata={}, name="n")


def main() -> None:
    """Print one line per op with the ratios to the direct call."""
    x, y = torch.randn(2, 2), torch.randn(2, 2)
    img, w = torch.randn(1, 3, 16, 16), torch.randn(8, 3, 3, 3)
    conv_inputs = {
        "input": _t("img"),
        "weight": _t("w"),
        "bias": m.Argument(as_none=True),
        "stride": m.Argument(as_ints=[1, 1]),
        "padding": m.Argument(as_ints=[1, 1]),
        "dilation": m.Argument(as_ints=[1, 1]),
        "groups": m.Argument(as_int=1),
    }
    cases = [
        ("aten.add 2x2", _node("aten::add.Tensor", {"self": _t("x"), "other": _t("y")}),
         {"x": x, "y": y}, [x, y], [], lambda: torch.ops.aten.add.Tensor(x, y)),
        ("aten.conv2d", _node("aten::conv2d", conv_inputs), {"img": img, "w": w}, [img, w], [1, 1, 1, 1, 1, 1, 1],
         lambda: torch.ops.aten.conv2d.default(img, w, None, [1, 1], [1, 1], [1, 1], 1)),
        ("custom op", _node("opwire_bench::scale", {"x": _t("x"), "alpha": m.Argument(as_float=3.0)}),
         {"x": x}, [x], [], lambda: torch.ops.opwire_bench.scale.default(x, 3.0)),
    ]  # fmt: skip
    print(f"{'op':14s} {'direct us':>10s} {'call us':>9s} {'ratio':>6s} {'call_function us':>17s} {'ratio':>6s}")
    for label, node, values, tensors, ints, direct in cases:
        ex = ProxyExecutor(m.ExternKernelNodes(nodes=[m.ExternKernelNode(name="buf0", node=node)]))
        slots = [*tensors, None]
        d = _median_us(direct)
        c = _median_us(lambda ex=ex, values=values: ex.call(0, values))
        f = _median_us(lambda ex=ex, ints=ints, slots=slots: ex.call_function(0, ints, slots))
        print(f"{label:14s} {d:10.2f} {c:9.2f} {c / d:6.2f} {f:17.2f} {f / d:6.2f}")
    add = cases[0][1]
    build = _median_us(
        lambda: ProxyExecutor(m.ExternKernelNodes(nodes=[m.ExternKernelNode(name="b", node=add)])), 5, 200
    )
    print(f"plan build per node (aten.add): {build:.1f} us")


if __name__ == "__main__":
    main()
