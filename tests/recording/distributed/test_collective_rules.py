"""The one table of collective kinds: every kind the recorder records has a rule, and each rule runs and checks.

The kinds the recorder can record come from where it decides a call is a collective: `is_distributed_op`
sends a c10d call to `collective_capture.record_call`, which takes its row from `collectives.COLLECTIVES`.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any, get_args

import pytest
import torch
import torch.distributed as dist

from opwire.recording.collectives import COLLECTIVES, Kind, collective_of, is_distributed_op
from opwire.recording.distributed.collective_rules import RULES, Arena, Recorded, reduce
from opwire.recording.distributed.execute import run_collective
from opwire.recording.distributed.numerics import check_collective
from opwire.recording.distributed.sequence import CollectiveCall, Names
from opwire.schema import models as m


def test_the_rules_cover_exactly_the_kinds_the_recorder_records() -> None:
    assert [op for op in COLLECTIVES if not is_distributed_op(op)] == [], "rows the recorder never sends to its table"
    recorded = {spec.kind for spec in COLLECTIVES.values()}
    kinds = set(get_args(Kind))
    assert recorded == kinds, f"kinds no c10d op records: {kinds - recorded}; kinds outside Kind: {recorded - kinds}"
    assert set(RULES) == kinds, f"kinds without a rule: {kinds - set(RULES)}; rules of no kind: {set(RULES) - kinds}"


def test_every_rule_says_how_to_run_it_and_why_nothing_is_checked_when_nothing_is() -> None:
    for kind, rule in RULES.items():
        assert rule.run is not None or kind == "wait", f"{kind}: a replay cannot run it"
        assert (rule.expect is None) == bool(rule.why), f"{kind}: give an `expect`, or say `why` there is none"


def test_the_rows_of_one_kind_agree_on_reduction_and_root() -> None:
    """`execute` and `numerics` read a reduction and a root from the row: every op of a kind must name them."""
    for kind in get_args(Kind):
        rows = {op: (bool(s.reduce), bool(s.root)) for op, s in COLLECTIVES.items() if s.kind == kind}
        assert len(set(rows.values())) == 1, f"{kind}: the ops disagree on naming a reduction or a root: {rows}"


def _call(op: str, rank: int, inputs: Names, outputs: Names, **values: Any) -> CollectiveCall:
    spec = collective_of(op)
    assert spec is not None
    return CollectiveCall(rank, 0, op, spec, "0", {}, inputs, outputs, "", "", values)


def _disagreeing(calls: list[CollectiveCall], tensors: dict[tuple[int, str], torch.Tensor]) -> list[int]:
    return [d.rank for d in check_collective(calls, lambda r, n: tensors[(r, n)])]


def test_reduce_gives_the_reduction_on_the_root_alone() -> None:
    calls = [_call("c10d::reduce_", r, ["x"], ["y"], reduce_op="MAX", root_rank=1) for r in range(3)]
    tensors = {(r, "x"): torch.tensor([float(r), -float(r)]) for r in range(3)}
    tensors |= {(r, "y"): torch.zeros(2) for r in range(3)}  # what the others hold after a reduce is not checked
    tensors[(1, "y")] = torch.tensor([2.0, 0.0])
    assert _disagreeing(calls, tensors) == []
    tensors[(1, "y")] = torch.tensor([2.0, -2.0])
    assert _disagreeing(calls, tensors) == [1]


_FLOATS = [
    torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2,
    torch.float8_e4m3fnuz, torch.float8_e5m2fnuz, torch.float8_e8m0fnu, torch.complex32, torch.complex64,
    torch.complex128,
]  # fmt: skip
_INTS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _adversarial(dtype: torch.dtype, w: int, shape: tuple[int, ...]) -> list[torch.Tensor]:
    """`w` tensors of `dtype` drawn from its raw bit patterns (every one of an 8-bit type; NaNs of either sign and
    payload, subnormals) and from values where the order of a sum shows: -0.0, +-inf, the largest, smallest normal
    and smallest subnormal, and magnitudes that cancel against 1."""
    real = torch.float32 if dtype == torch.complex32 else torch.float64 if dtype.is_complex else dtype
    info = torch.finfo(real)
    picks = [0.0, -0.0, 1.0, -1.0, 3.0, float("inf"), -float("inf"), float("nan"), -float("nan"), info.max, -info.max]
    picks += [info.smallest_normal, info.tiny / 4, -info.smallest_normal / 2, info.eps, info.max / 3, 1 / info.eps]
    values = torch.tensor(picks, dtype=torch.float64).to(real)
    size = real.itemsize
    bits = torch.arange(256, dtype=torch.uint8) if size == 1 else torch.randint(-(2**31), 2**31, (2048 * size,))
    raw = bits.to(_INTS[size]) if size == 1 else bits.to(torch.int32).view(torch.uint8)[: 2048 * size]
    pool = torch.cat([values, raw.view(torch.uint8).view(real)])
    n = max(1, int(torch.tensor(shape).prod()))
    xs = [pool[torch.randint(0, pool.numel(), (2 * n if dtype.is_complex else n,))] for _ in range(w)]
    if dtype.is_complex:
        xs = [torch.view_as_complex(x.view(-1, 2)) for x in xs]
    return [x.reshape(shape).to(dtype) if dtype == torch.complex32 else x.reshape(shape) for x in xs]


def _the_widened_stack(op: str, xs: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor | None]:
    """What `reduce` computed before it reused its stack: `torch.stack` of the inputs widened, then each reduction
    on it and the scale from a separate `abs()`."""
    stack = torch.stack([x.to(torch.complex128 if x.is_complex() else torch.float64) for x in xs])
    scale = stack.abs().sum(0)
    if op == "SUM":
        return stack.sum(0), scale
    if op == "AVG":
        return stack.sum(0) / len(xs), scale / len(xs)
    if op == "PRODUCT":
        return stack.prod(0), stack.abs().prod(0)
    return (stack.amin(0) if op == "MIN" else stack.amax(0)), None


class _Dirty(Arena):
    """An arena whose lent buffers come with every bit set, whatever the check before left in them."""

    def empty(self, shape: Any, dtype: torch.dtype) -> torch.Tensor:
        t = super().empty(shape, dtype)
        (t.view(torch.uint8) if t.dim() else t.reshape(1).view(torch.uint8)).fill_(255)
        return t


def _bits(t: torch.Tensor) -> torch.Tensor:
    real = (torch.view_as_real(t) if t.is_complex() else t).contiguous().reshape(-1)
    return real.view(_INTS[real.dtype.itemsize])


@pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")
@pytest.mark.parametrize("dtype", _FLOATS, ids=str)
def test_reductions_are_those_of_the_widened_stack_bit_for_bit(dtype: torch.dtype) -> None:
    """`reduce` widens its inputs as it stacks them and takes the magnitudes over its own stack: every reduction
    and scale has the bits (NaN payloads and signs, -0.0, subnormals) of `torch.stack(xs).to(wide)` and a separate
    `abs()`, for 1 to 17 ranks (sums of more than 4 rows are not added in rank order by torch), contiguous,
    transposed and mixed inputs, and a mix of dtypes (the stack-then-widen path); the same through one `Arena`
    whose buffers held the previous reductions (other sizes, ranks and dtypes) and are set to all-ones bits
    (NaN) before each is lent: no byte of an earlier check shows in a result."""
    torch.manual_seed(0)
    ops = ["SUM", "AVG", "PRODUCT"] + ([] if dtype.is_complex else ["MIN", "MAX"])
    arena = _Dirty()
    for w in (1, 2, 3, 4, 5, 7, 8, 16, 17):
        for shape in ((), (7,), (33, 5)):
            xs = _adversarial(dtype, w, shape)
            if len(shape) == 2:
                xs = [x.t() if k % 2 else x.t().contiguous() for k, x in enumerate(xs)]
            mixed = [
                x.to(torch.complex64 if x.is_complex() else torch.float32) if k == 0 else x for k, x in enumerate(xs)
            ]
            for inputs in (xs, mixed):
                kept = [x.clone() for x in inputs]
                for op in ops:
                    want, scale = _the_widened_stack(op, inputs)
                    for lent in (None, arena):
                        got, got_scale = reduce(op, inputs, lent)
                        where = f"{op} of {w} x {shape} {[x.dtype for x in inputs][:2]}, arena {lent is not None}"
                        assert got.dtype == want.dtype and torch.equal(_bits(got), _bits(want)), where
                        assert (got_scale is None) == (scale is None), where
                        if scale is not None:
                            assert got_scale is not None and torch.equal(_bits(got_scale), _bits(scale)), where
                    arena.release()
                assert all(torch.equal(_bits(a), _bits(b)) for a, b in zip(inputs, kept, strict=True)), "an input moved"


def test_checks_through_one_arena_find_what_fresh_tensors_find_whatever_the_check_before_left() -> None:
    """One `Arena` lent to a sequence of checks of different ranks, sizes and dtypes (its buffers keep the earlier
    checks' stacks and results): every check finds the ranks it finds with fresh tensors, and an output that equals
    the previous check's expected value (what a stale buffer would hold) is refused."""
    torch.manual_seed(0)
    arena, seq = Arena(), []
    for w, n, dtype in ((4, 64, torch.float32), (2, 64, torch.float32), (3, 17, torch.float16), (4, 64, torch.float64),
                        (2, 5, torch.bfloat16), (4, 64, torch.float32), (3, 3, torch.complex64)):  # fmt: skip
        xs = [torch.randn(n, dtype=dtype) for _ in range(w)]
        total = torch.stack([x.to(torch.complex128 if dtype.is_complex else torch.float64) for x in xs]).sum(0)
        outs = [total.to(dtype) for _ in range(w)]
        outs[w - 1] = outs[w - 1] + 1  # one rank off
        seq.append((w, xs, outs))
    previous = None
    for w, xs, outs in seq * 2:
        calls = [_call("c10d::allreduce_", r, ["x"], ["y"], reduce_op="SUM") for r in range(w)]
        tensors = {(r, "x"): xs[r] for r in range(w)} | {(r, "y"): outs[r] for r in range(w)}
        fresh = check_collective(calls, lambda r, n, t=tensors: t[(r, n)])
        lent = check_collective(calls, lambda r, n, t=tensors: t[(r, n)], arena=arena)
        assert [d.rank for d in fresh] == [w - 1] and lent == fresh
        if previous is not None and previous.shape == xs[0].shape and previous.dtype == xs[0].dtype:
            stale = tensors | {(r, "y"): previous for r in range(w)}  # the result of the check before: wrong here
            got = check_collective(calls, lambda r, n, t=stale: t[(r, n)], arena=arena)
            assert [d.rank for d in got] == list(range(w))
        previous = outs[0]


def test_an_arena_lends_distinct_buffers_in_a_check_reuses_them_after_and_keeps_a_bounded_amount() -> None:
    arena = Arena(keep=1 << 12)
    a, b = arena.empty((16,), torch.float64), arena.empty((2, 8), torch.float64)
    assert a.data_ptr() != b.data_ptr() and a.is_contiguous() and b.shape == (2, 8)
    ptrs = {a.data_ptr(), b.data_ptr()}
    arena.release()
    c, d = arena.empty((4, 4), torch.float64), arena.empty((100,), torch.uint8)  # 128 bytes: the same size class
    assert {c.data_ptr(), d.data_ptr()} == ptrs and d.dtype == torch.uint8
    arena.release()
    big = arena.empty((1 << 11,), torch.float64)  # 16 KiB, more than `keep`
    arena.release()
    assert arena.empty((1 << 11,), torch.float64).data_ptr() == big.data_ptr()  # the last check's buffers are kept
    assert arena.nbytes == (1 << 14) + 256
    arena.release()
    arena.empty((3,), torch.int64)
    arena.release()  # the 16 KiB buffer the last check did not use is over `keep`: dropped, the small ones kept
    assert arena.nbytes == 256 + 32


def test_reduce_scatter_gives_rank_i_the_sum_of_every_rank_s_ith_tensor() -> None:
    calls = [_call("c10d::reduce_scatter_", r, [["a", "b"]], ["y"], reduce_op="SUM") for r in range(2)]
    tensors = {(r, n): torch.tensor([float(10 * r + k)]) for r in range(2) for k, n in enumerate("ab")}
    tensors |= {(0, "y"): torch.tensor([10.0]), (1, "y"): torch.tensor([12.0])}
    assert _disagreeing(calls, tensors) == []
    tensors[(0, "y")] = torch.tensor([11.0])
    assert _disagreeing(calls, tensors) == [0]


def test_all_to_all_gather_and_scatter_move_tensors_bitwise() -> None:
    a2a = [_call("c10d::alltoall_", r, ["i0", "i1"], ["o0", "o1"]) for r in range(2)]
    tensors = {(r, f"i{j}"): torch.tensor([float(10 * r + j)]) for r in range(2) for j in range(2)}
    tensors |= {(r, f"o{j}"): tensors[(j, f"i{r}")] for r in range(2) for j in range(2)}
    assert _disagreeing(a2a, tensors) == []
    tensors[(1, "o0")] = torch.tensor([1.5])
    assert _disagreeing(a2a, tensors) == [1]

    gather = [_call("c10d::gather_", r, ["x"], [["g0", "g1"]] if r == 0 else [[]], root_rank=0) for r in range(2)]
    tensors = {(r, "x"): torch.tensor([float(r + 1)]) for r in range(2)}
    tensors |= {(0, "g0"): torch.tensor([1.0]), (0, "g1"): torch.tensor([2.0])}
    assert _disagreeing(gather, tensors) == []
    tensors[(0, "g1")] = torch.tensor([3.0])
    assert _disagreeing(gather, tensors) == [0]

    scatter = [_call("c10d::scatter_", r, [["s0", "s1"]] if r == 1 else [[]], ["y"], root_rank=1) for r in range(2)]
    tensors = {(1, "s0"): torch.tensor([5.0]), (1, "s1"): torch.tensor([6.0])}
    tensors |= {(0, "y"): torch.tensor([5.0]), (1, "y"): torch.tensor([6.0])}
    assert _disagreeing(scatter, tensors) == []
    tensors[(0, "y")] = torch.tensor([6.0])
    assert _disagreeing(scatter, tensors) == [0]


def test_an_unknown_reduction_is_not_checked() -> None:
    calls = [_call("c10d::allreduce_", r, ["x"], ["x"], reduce_op="PREMUL_SUM") for r in range(2)]
    assert check_collective(calls, lambda r, n: torch.tensor([float(r)])) == []


@pytest.fixture
def one_rank() -> Iterator[Any]:
    """A one-rank gloo group in this process (destroyed after the test)."""
    dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())  # type: ignore[attr-defined]
    try:
        yield dist.group.WORLD
    finally:
        dist.destroy_process_group()


def _arg(names: Names) -> m.Argument:
    if names and isinstance(names[0], list):
        return m.Argument(as_nested_tensors=[[m.TensorArgument(name=n) for n in row] for row in names])
    return m.Argument(as_tensors=[m.TensorArgument(name=n) for n in names])


# one op per kind the replay runs in a one-rank group: (inputs, outputs, scalars)
_ONE_RANK: dict[str, tuple[Names, Names, dict[str, Any]]] = {
    "c10d::allreduce_": (["a", "b"], ["a", "b"], {"reduce_op": "SUM"}),
    "c10d::reduce_": (["a"], ["a"], {"reduce_op": "MAX", "root_rank": 0}),
    "c10d::allgather_": (["a"], [["o"]], {}),
    "c10d::_allgather_base_": (["a"], ["o"], {}),
    "c10d::reduce_scatter_": ([["a"]], ["o"], {"reduce_op": "SUM"}),
    "c10d::_reduce_scatter_base_": (["a"], ["o"], {"reduce_op": "AVG"}),
    "_c10d_functional::broadcast": (["a"], ["o"], {"src": 0}),
    "c10d::alltoall_": (["a"], ["o"], {}),
    "c10d::alltoall_base_": (["a"], ["o"], {}),
    "c10d::gather_": (["a"], [["o"]], {"root_rank": 0}),
    "c10d::scatter_": ([["a"]], ["o"], {"root_rank": 0}),
    "c10d::barrier": ([], [], {}),
}


def _run_and_expect(op: str, ins: Names, outs: Names, scalars: dict[str, Any], pg: Any) -> None:
    """Run `op` in the one-rank group `pg` and compare its results with what its kind's rule expects."""
    spec = COLLECTIVES[op]
    tensors = {n: torch.randn(3) for n in ("a", "b")} | {"o": torch.zeros(3)}
    recorded = {n: t.clone() for n, t in tensors.items()}
    args = {spec.outputs: _arg(outs)} if spec.outputs not in ("", "return", spec.inputs) else {}
    call = CollectiveCall(0, 0, op, spec, "0", args, ins, outs, "", "", scalars)
    meta: Any = SimpleNamespace(dtype=m.ScalarType.FLOAT.value, sizes=[3], strides=[1])
    got = run_collective(call, {"0": pg}, {"0": [0]}, tensors.__getitem__, lambda n: meta)
    expect = RULES[spec.kind].expect
    want = expect(Recorded([call], lambda r, n: recorded[n], str(scalars.get(spec.reduce, "")))) if expect else {}
    flat = [n for x in outs for n in (x if isinstance(x, list) else [x])]
    assert len(got) == len(flat), op
    for (_, path), (value, _) in want.items():
        k = flat.index(str(outs[path[0]][path[1]] if len(path) == 2 else outs[path[0]]))
        assert torch.allclose(got[k].to(value.dtype), value), f"{op}: output {path}"


def test_each_kind_runs_and_gives_what_its_rule_expects(one_rank: Any) -> None:
    ran = {COLLECTIVES[op].kind for op in _ONE_RANK}
    assert ran == {k for k, r in RULES.items() if r.run is not None} - {"send", "recv"}  # p2p needs a peer
    for op, (ins, outs, scalars) in _ONE_RANK.items():
        _run_and_expect(op, ins, outs, scalars, one_rank)
