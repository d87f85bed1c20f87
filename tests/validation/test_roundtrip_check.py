"""The round-trip check of `ops validate --sample-inputs`: record, serialize (JSON, compact), replay per policy."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import corpus_ops
import pytest
import torch

import opwire
from opwire.validation.roundtrip_check import CODES, roundtrip_findings


@pytest.fixture
def noisy() -> Iterator[Any]:
    lib = torch.library.Library("opwire_rt", "DEF")
    lib.define("noisy(Tensor x) -> Tensor")
    lib.impl("noisy", lambda x: x + torch.rand(()).item(), "CPU")
    yield torch.ops.opwire_rt.noisy.default
    lib._destroy()


def _mix_samples(name: str) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    return [((x, y), {}), ((x,), {"flag": False, "mode": "max", "dims": [0, 1]})]


def test_a_sound_custom_op_has_no_findings() -> None:
    corpus_ops.register()
    assert roundtrip_findings("opwire_test::mix.default", torch.ops.opwire_test.mix.default, _mix_samples) == []


def test_a_nondeterministic_kernel_fails_replay_under_every_policy(noisy: Any) -> None:
    found = roundtrip_findings("opwire_rt::noisy.default", noisy, lambda _: [((torch.randn(3),), {})])
    (f,) = found  # one cause (the kernel), however many policies show it
    assert f.code == "roundtrip_replay_failed" and f.severity.value == "error"
    assert f.message.startswith(
        "opwire_rt::noisy.default: on sample 0, replay under REQUIRE_SERIALIZED, REQUIRE_CALLER, FROM_SCHEMA: "
        "1 mismatch(es), first: "
    )
    assert "value mismatch" in f.message


def test_a_decomposed_op_is_reported_as_not_recorded() -> None:
    found = roundtrip_findings(
        "aten::dropout", torch.ops.aten.dropout.default, lambda _: [((torch.randn(4), 0.5, True), {})]
    )
    (f,) = found
    assert f.code == "roundtrip_not_recorded" and "aten::bernoulli_.float" in f.message


def test_a_failing_call_is_a_record_finding() -> None:
    corpus_ops.register()
    found = roundtrip_findings(
        "opwire_test::mix.default", torch.ops.opwire_test.mix.default, lambda _: [((torch.randn(2), "x"), {})]
    )
    assert [f.code for f in found] == ["roundtrip_record_failed"]


def test_validate_op_runs_the_round_trip(noisy: Any) -> None:
    (report,) = opwire.validate_op("opwire_rt::noisy", sample_inputs=lambda _: [((torch.randn(3),), {})])
    assert "roundtrip_replay_failed" in {f.code for f in report.findings}


def test_codes_are_documented() -> None:
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "errors.md").read_text()
    assert all(f"`{code}`" in text for code in CODES)
