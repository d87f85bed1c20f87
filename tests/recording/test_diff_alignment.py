"""`opwire.diff_traces` on training loops: a change in step k is reported at its call in step k, nothing else moves.

Every step of a loop repeats the same calls, so an aligner that pairs the longest common blocks first can pair
step 1 of one run with step 2 of the other and report hundreds of differences for a two-call insertion. The
aligner strips the common prefix and suffix, anchors each repetition of a call to the same repetition in the
other run, and takes a minimal edit script between anchors.
"""

from __future__ import annotations

import itertools
import random

import pytest
import torch

import opwire
from opwire.recording.align import _myers, align, opcodes
from opwire.recording.trace_diff import OnlyIn

LOOP = """
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
opt = OPT(model.parameters(), lr=1e-2)
x, y = torch.randn(8, 4), torch.randn(8, 2)
for step in range(STEPS):
    h = model(x)
    if step == CHANGE:
        h = h * 2.0
    loss = torch.nn.functional.mse_loss(h, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""
CHANGED_LINE = "train_loop.py:9 in <module>"  # `h = h * 2.0`


def _train(steps: int, change: int | None, opt: type[torch.optim.Optimizer]) -> opwire.Trace:
    with opwire.record() as trace:
        scope = {"torch": torch, "OPT": opt, "STEPS": steps, "CHANGE": change}
        exec(compile(LOOP, "train_loop.py", "exec"), scope)
    return trace


@pytest.mark.parametrize(
    ("steps", "change", "opt"),
    [(5, 2, torch.optim.AdamW), (100, 49, torch.optim.AdamW)],
    ids=["5-steps", "100-steps"],
)
def test_a_change_in_step_k_is_reported_at_its_call(steps: int, change: int, opt: type[torch.optim.Optimizer]) -> None:
    a, b = _train(steps, None, opt), _train(steps, change, opt)
    inserted = [i for i, r in enumerate(b.records) if r.metadata.get("source") == CHANGED_LINE]
    assert len(inserted) == 1 and b.records[inserted[0]].target == "aten::mul.Tensor"
    d = opwire.diff_traces(a, b)
    # one mul in forward, its backward mul; every call of A is paired with its own call in B
    assert not d.only_a and [o.op for o in d.only_b] == ["aten::mul.Tensor", "aten::mul.Tensor"], str(d)
    assert d.matched == d.a_calls == d.b_calls - 2
    first = d.first_divergence
    assert isinstance(first, OnlyIn) and (first.side, first.index, first.at) == ("B", inserted[0], inserted[0])
    assert first.source == CHANGED_LINE
    # before the first propagated value: nothing but the inserted call; after it, nothing earlier than it
    assert all(getattr(e, "a_index", inserted[0]) >= inserted[0] for e in d.events)
    assert f"first local divergence: only in B: call {inserted[0]} aten::mul.Tensor (at {CHANGED_LINE})" in str(d)
    # every value after it differs only because its inputs did: run again on A's inputs, B's calls agree
    checked = [x.origin for x in d.differences if x.origin]
    assert checked and set(checked) == {"inherited"}, [x for x in d.differences if x.origin != "inherited"][:3]
    assert d.first_local is first


def test_lines_that_moved_still_align_by_op() -> None:
    a = [("aten::mm", "x.py:3", ""), ("aten::relu", "x.py:4", ""), ("aten::sum", "x.py:5", "")]
    b = [("aten::mm", "x.py:13", ""), ("aten::relu", "x.py:14", ""), ("aten::sum", "x.py:15", "")]
    ops_a, ops_b = [k[0] for k in a], [k[0] for k in b]
    assert align(a, b) == []
    assert align(a, b, (ops_a, ops_b)) == [(0, 0), (1, 1), (2, 2)]


def _lcs(a: list[str], b: list[str]) -> int:
    dp = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i in range(len(a) - 1, -1, -1):
        for j in range(len(b) - 1, -1, -1):
            dp[i][j] = dp[i + 1][j + 1] + 1 if a[i] == b[j] else max(dp[i + 1][j], dp[i][j + 1])
    return dp[0][0]


def test_the_edit_script_is_minimal_and_the_opcodes_cover_both_sides() -> None:
    rnd = random.Random(0)
    for _ in range(500):
        a = [rnd.choice("abc") for _ in range(rnd.randint(0, 12))]
        b = [rnd.choice("abc") for _ in range(rnd.randint(0, 12))]
        for pairs in (_myers(a, b, 0, len(a), 0, len(b)), align(a, b)):
            assert all(a[i] == b[j] for i, j in pairs)
            assert all(p < q and s < t for (p, s), (q, t) in itertools.pairwise(pairs))
        assert len(_myers(a, b, 0, len(a), 0, len(b))) == _lcs(a, b), (a, b)
        ops = opcodes(align(a, b), len(a), len(b))
        assert [i for o in ops for i in range(o[1], o[2])] == list(range(len(a)))
        assert [j for o in ops for j in range(o[3], o[4])] == list(range(len(b)))


def test_each_coarser_key_realigns_only_the_calls_still_unpaired() -> None:
    a = [("t", 1), ("mm", 2), ("relu", 3), ("det", 4)]
    b = [("t", 1), ("mm", 2), ("sigmoid", 3), ("det", 4)]
    ops_a, ops_b = [k[0] for k in a], [k[0] for k in b]
    assert align(a, b, (a, b), (ops_a, ops_b)) == [(0, 0), (1, 1), (3, 3)]  # relu never pairs with sigmoid
    lines_a, lines_b = [(k[0], k[1] + 10) for k in a], [(k[0], k[1] + 20) for k in b]
    assert align(lines_a, lines_b, (lines_a, lines_b), (ops_a, ops_b)) == [(0, 0), (1, 1), (3, 3)]
