"""How a run's work is split over the processes torchrun launched (`Share`), without launching any."""

from __future__ import annotations

from opwire.recording.distributed.share import Share


def test_balanced_splits_every_item_to_exactly_one_process() -> None:
    costs = [5, 0, 7, 7, 1, 9, 2, 2, 3]
    for count in (1, 2, 3, 4):
        parts = [Share(i, count).balanced(costs) for i in range(count)]
        assert sorted(k for p in parts for k in p) == list(range(len(costs)))


def test_balanced_does_not_follow_the_period_of_the_costs() -> None:
    # a training step's gradients: a large weight and a small bias, again and again; `mine` (k % count) would give
    # every weight to process 0 and every bias to process 1
    costs = [1000, 1] * 8
    assert [Share(i, 2).mine(k) for i in range(2) for k in (0, 2)] == [True, True, False, False]
    loads = [sum(costs[k] for k in Share(i, 2).balanced(costs)) for i in range(2)]
    assert loads == [4004, 4004]


def test_balanced_breaks_ties_alike_in_every_process() -> None:
    costs = [3, 3, 3, 3]
    assert [sorted(Share(i, 2).balanced(costs)) for i in range(2)] == [[0, 2], [1, 3]]
    assert Share().balanced(costs) == {0, 1, 2, 3}
