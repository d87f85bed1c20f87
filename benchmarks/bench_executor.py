"""Per-call time of ProxyExecutor.call / call_function (plans built) against direct torch.ops calls, and a
checked run of the corpus's largest programs against the same runs with the checks off.

Each side is timed in rounds that alternate with the other side's, on this thread's CPU clock (time a loaded
machine gives to other processes is not billed); the figures are the best round of each side (best-of-N) and
their ratio, with the median of per-round ratios beside it. The checked run includes every check: preconditions
(verdicts remembered by layout), memory estimates, and the undeclared-write check's per-run layout key; its
checking pass (once per input layout) is printed on its own. `--programs NAME...` picks corpus programs (default:
the largest; `--programs none` skips them); `--rounds N` sets N.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from opwire.proxy_executor import ProxyExecutor
from opwire.proxy_executor.runner import ProgramRunner
from opwire.schema import models as m
from opwire.serde import torch_bridge

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from support import corpus  # the tests' corpus (importable once its folder is on the path)

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


ROUNDS = 15


def _rounds(fns: list[Callable[[], Any]], repeat: int = 0, number: int = 1000) -> list[list[float]]:
    """Per round, each fn's mean us per call (this thread's CPU time); the fns alternate within a round."""
    for fn in fns:
        fn()
    rounds = []
    for _ in range(repeat or ROUNDS):
        row = []
        for fn in fns:
            start = time.thread_time_ns()
            for _ in range(number):
                fn()
            row.append((time.thread_time_ns() - start) / number / 1e3)
        rounds.append(row)
    return rounds


def _best(rounds: list[list[float]], i: int) -> float:
    return min(r[i] for r in rounds)


def _ratio(rounds: list[list[float]], i: int, base: int = 0) -> float:
    """The ratio of the two sides' best rounds."""
    return _best(rounds, i) / _best(rounds, base)


def _median_ratio(rounds: list[list[float]], i: int, base: int = 0) -> float:
    return statistics.median(r[i] / r[base] for r in rounds)


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
    print("best of", ROUNDS, "rounds (thread CPU time); ratio = best / best (median of per-round ratios)")
    print(f"{'op':14s} {'direct us':>10s} {'call us':>9s} {'ratio':>13s} {'call_function us':>17s} {'ratio':>13s}")
    for label, node, values, tensors, ints, direct in cases:
        ex = ProxyExecutor(m.ExternKernelNodes(nodes=[m.ExternKernelNode(name="buf0", node=node)]))
        slots = [*tensors, None]
        rounds = _rounds(
            [
                direct,
                lambda ex=ex, values=values: ex.call(0, values),
                lambda ex=ex, ints=ints, slots=slots: ex.call_function(0, ints, slots),
            ]
        )
        d, c, f = (_best(rounds, i) for i in range(3))
        cr, fr = (f"{_ratio(rounds, i):.2f} ({_median_ratio(rounds, i):.2f})" for i in (1, 2))
        print(f"{label:14s} {d:10.2f} {c:9.2f} {cr:>13s} {f:17.2f} {fr:>13s}")
    add = cases[0][1]
    build = _median_us(
        lambda: ProxyExecutor(m.ExternKernelNodes(nodes=[m.ExternKernelNode(name="b", node=add)])), 5, 200
    )
    print(f"plan build per node (aten.add): {build:.1f} us")


def _unchecked(runner: ProgramRunner, args: tuple[Any, ...]) -> None:
    """Turn off the runner's checks (preconditions, memory estimates) and its undeclared-write check, once bound."""
    runner(*args)
    for p in runner.bound.plans:
        p.checks = None  # the fast call of each plan reads its checks at call time
    runner.bound.write_check = None  # no layout key per run, no checking pass


def programs(names: list[str]) -> None:
    """Print, per corpus program, a checked run against the same run with the checks off."""
    print(f"\n{'program':24s} {'checked us':>11s} {'unchecked us':>13s} {'ratio':>13s} {'checking pass us':>17s}")
    for name in names:
        prog = corpus.get_program(name)
        archive = torch_bridge.archive_from_exported_program(prog.ep)
        checked, bare = ProgramRunner(archive), ProgramRunner(archive)
        _unchecked(bare, prog.args)
        args = prog.args
        rounds = _rounds([lambda r=checked, a=args: r(*a), lambda r=bare, a=args: r(*a)], number=30)
        c, u = (_best(rounds, i) for i in range(2))
        ratio = f"{_ratio(rounds, 0, 1):.2f} ({_median_ratio(rounds, 0, 1):.2f})"
        print(f"{name:24s} {c:11.1f} {u:13.1f} {ratio:>13s} {_checking_pass(checked, args):17.1f}")


def _checking_pass(runner: ProgramRunner, args: tuple[Any, ...]) -> float:
    """The best time of a run whose input layout is new to the undeclared-write check (its checking pass)."""
    best = float("inf")
    for _ in range(5):
        check = runner.bound.write_check
        if check is not None:
            check.verified.clear()
        start = time.thread_time_ns()
        runner(*args)
        best = min(best, (time.thread_time_ns() - start) / 1e3)
    return best


LARGEST = ["transformer/training", "transformer/decomposed", "lstm/training", "lstm/decomposed", "conv_bn/decomposed"]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", nargs="*", default=LARGEST, help="corpus programs, or none")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="rounds per side (the best is reported)")
    parsed = parser.parse_args()
    chosen, ROUNDS = parsed.programs, parsed.rounds
    main()
    if chosen != ["none"]:
        programs(chosen)
