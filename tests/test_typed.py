"""support.typed's fast strategies draw what Hypothesis's own spelling of them draws: the same choices give the same
values (so the round-trip and fuzz tests keep their space and distribution of models while generating them faster)."""

from __future__ import annotations

import random

import pytest
from hypothesis.control import BuildContext
from hypothesis.errors import StopTest
from hypothesis.internal.conjecture.data import ConjectureData
from support.typed import MODEL_NAMES, assert_identical, plain_strategy_for, strategy_for

_SEEDS = 2  # per model: random draws of every type, recorded as choices and replayed


def _no_test() -> None:
    """The test a BuildContext names; nothing runs it."""


@pytest.mark.parametrize("seed", range(_SEEDS))
def test_the_fast_strategies_make_the_plain_ones_choices_into_the_same_values(seed: int) -> None:
    replayed = 0
    for i, name in enumerate(MODEL_NAMES):
        plain = ConjectureData(random=random.Random(seed * len(MODEL_NAMES) + i))
        try:
            with BuildContext(plain, wrapped_test=_no_test):
                want = plain.draw(plain_strategy_for(name))
        except StopTest:  # overran the choice budget: nothing to replay
            continue
        fast = ConjectureData.for_choices(plain.choices)
        with BuildContext(fast, wrapped_test=_no_test):
            got = fast.draw(strategy_for(name))
        assert fast.index == len(plain.choices), (name, "a different number of choices")
        assert_identical(got, want, name)
        replayed += 1
    assert replayed > len(MODEL_NAMES) * 0.9
