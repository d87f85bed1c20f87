"""`ops validate --sample-inputs`: torch's logging goes into the finding it belongs to; fixes follow the cause."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import torch

from opwire.validation.opcheck import fix_for, opcheck_findings

_lib = torch.library.Library("opwire_logs", "FRAGMENT")


@torch.library.custom_op("opwire_logs::noisy", mutates_args=())
def noisy(x: torch.Tensor) -> torch.Tensor:
    for k in range(500):  # what Dynamo and AOTAutograd do to a terminal when a check fails
        logging.getLogger("torch._dynamo.noisy").warning("traceback line %d of a failed compile", k)
    return x.cos()


@noisy.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return x.new_empty((x.shape[0] + 1,))  # the wrong shape: test_faketensor fails


def _samples(op: str) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    return [((torch.randn(3),), {})]


def test_torch_logging_goes_into_the_finding_not_to_the_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    logging.getLogger("torch._dynamo.noisy").addHandler(logging.StreamHandler())  # as torch's own setup does
    found = opcheck_findings("opwire_logs::noisy", torch.ops.opwire_logs.noisy.default, _samples)
    captured = capsys.readouterr()
    assert "traceback line" not in captured.err + captured.out
    fake = next(f for f in found if "test_faketensor" in f.message)
    assert "torch logged " in fake.message and "'traceback line 0 of a failed compile'" in fake.message
    assert fake.fix == "make the fake implementation (register_fake) return the real kernel's output sizes and strides"
    assert logging.getLogger("torch._dynamo.noisy").handlers  # the program's own handlers are back


@pytest.mark.parametrize(
    ("test", "error", "fix"),
    [
        ("test_faketensor", "RuntimeError: There was no fake impl registered for foo", "register a fake implementation"),
        ("test_aot_dispatch_dynamic", "GuardOnDataDependentSymNode: Could not guard on data-dependent expression",
         "the fake implementation reads tensor data"),
        ("test_aot_dispatch_dynamic", "RuntimeError: int() on a SymInt", "make the fake implementation work with symbolic"),
        ("test_schema", "RuntimeError: argument x is mutated but not marked as mutable", "make the schema's mutation"),
        ("test_autograd_registration", "AssertionError: something else entirely", "register the autograd formula"),
        ("test_unknown", "RuntimeError: odd", "read the opcheck error"),
    ],
)  # fmt: skip
def test_each_fix_line_is_chosen_by_the_cause(test: str, error: str, fix: str) -> None:
    assert fix_for(test, error).startswith(fix)
