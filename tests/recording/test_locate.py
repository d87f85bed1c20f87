"""Where a recorded call comes from: the user's line, past torch, opwire and call wrappers."""

from __future__ import annotations

import functools
import warnings
from pathlib import Path

import torch
import typing_extensions

import opwire


def test_a_deprecation_wrapper_is_not_the_source() -> None:
    """torch wraps `dist.all_gather_into_tensor` and others in `@deprecated`: the wrapper's frame was shown
    (`typing_extensions.py:3140`) instead of the line that called it."""
    mul = typing_extensions.deprecated("use torch.mul")(functools.partial(torch.mul))  # no frame of its own
    with warnings.catch_warnings(), opwire.record() as trace:
        warnings.simplefilter("ignore")
        mul(torch.ones(2), 2)
    (rec,) = [r for r in trace.records if r.target.startswith("aten::mul")]
    source = rec.metadata["source"]
    assert Path(__file__).name in source and "in test_a_deprecation_wrapper_is_not_the_source" in source, source
