"""The round-trip check of `ops validate --sample-inputs`: record, serialize (JSON, compact), replay per policy."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch
from support import corpus_ops
from support.clirun import run_cli

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
        "1 mismatch, first: "
    )
    assert "value mismatch" in f.message
    assert f.fix.startswith(
        "the op draws random numbers (two calls on equal inputs differ): tag it nondeterministic_seeded"
    )


@pytest.fixture
def with_generator() -> Iterator[Any]:
    lib = torch.library.Library("opwire_gen", "DEF")
    lib.define("draw(Tensor x, *, Generator? generator=None) -> Tensor")
    lib.define(
        "seeded_draw(Tensor x, *, Generator? generator=None) -> Tensor", tags=(torch.Tag.nondeterministic_seeded,)
    )
    for name in ("draw", "seeded_draw"):
        lib.impl(name, lambda x, generator=None: x + torch.rand(x.shape, generator=generator), "CPU")
    yield
    lib._destroy()


def test_a_generator_argument_is_a_warning_with_the_fix(with_generator: None) -> None:
    (report,) = opwire.validate_op("opwire_gen::draw")
    (f,) = [f for f in report.findings if f.code == "generator_argument"]
    assert f.severity.value == "warning"
    assert f.message.startswith(
        "opwire_gen::draw.default: argument 'generator' has type Generator?; torch.export cannot put"
    )
    assert "not tagged nondeterministic_seeded" in f.message
    assert f.fix.startswith("to make the op export- and replay-friendly, drop 'generator'")
    assert "tag it nondeterministic_seeded" in f.fix
    (report,) = opwire.validate_op("opwire_gen::seeded_draw")
    (f,) = [f for f in report.findings if f.code == "generator_argument"]
    assert "tag it" not in f.fix and "not tagged" not in f.message


def test_cli_validate_shows_the_generator_finding(with_generator: None, tmp_path: Any) -> None:

    lib = tmp_path / "genops.py"
    lib.write_text(
        "import torch\n"
        "lib = torch.library.Library('opwire_gen2', 'DEF')\n"
        "lib.define('draw(Tensor x, *, Generator? generator=None) -> Tensor')\n"
    )
    done = run_cli("ops", "validate", "opwire_gen2::draw", "--import", lib, cwd=tmp_path)
    assert "warning generator_argument: opwire_gen2::draw.default: argument 'generator'" in done.stdout, (
        done.stdout + done.stderr
    )


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
