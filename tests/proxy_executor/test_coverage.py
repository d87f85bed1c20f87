"""The coverage corpus, sampled: ordinary work runs with no allow_ops, and the policy admits what the full run saw.

The whole corpus is `make coverage` (tests/support/coverage_run.py, minutes); this file runs one case of each
kind in seconds, and checks the committed policy against the ops the last full run saw
(tests/support/coverage_seen_ops.txt), which were gathered independently of the policy's derivation.
"""

from __future__ import annotations

import importlib
import importlib.util

import pytest
from support.coverage_diffusers import diffusers_cases
from support.coverage_hf import hf_cases, model_training_cases
from support.coverage_nn import ProgramCase, functional_cases, loss_cases, module_cases
from support.coverage_run import SEEN, core_aten_table, run_program_case, run_recorded_case
from support.coverage_train import training_cases

from opwire.proxy_executor.allowlist import allowlist

_MODULES = ("Conv2d", "ReLU6", "LSTM", "TransformerEncoderLayer", "Upsample")
_FUNCTIONS = ("F.glu", "F.grid_sample", "F.unfold")
_LOSSES = ("CrossEntropyLoss", "KLDivLoss", "SmoothL1Loss")
_TRAINING = ("AdamW (foreach)", "Adagrad (single)")
_TRANSFORMERS = ("llama", "bert", "qwen3_moe")  # rope and SDPA, an encoder, a MoE router (transformers' own op)
_DIFFUSERS = ("DiTTransformer2DModel",)
_RECORDED = ("llama", "bert", "qwen3_moe")  # qwen3_moe: an expand adopted in chained replay, index_put_


def _built(cases: list[ProgramCase], count: int) -> list[ProgramCase]:
    assert len(cases) == count and all(c.module is not None for c in cases), [(c.name, c.why) for c in cases]
    return cases


def test_every_op_the_last_coverage_run_saw_is_admitted() -> None:
    seen = [line for line in SEEN.read_text().splitlines() if line and not line.startswith("#")]
    assert len(seen) > 250  # the full run's ops (272 in torch 2.13), not a sample's
    missing = sorted(set(seen) - allowlist())
    assert missing == [], f"the op policy refuses ops the coverage corpus ran: {missing}"


@pytest.mark.slow
def test_a_sample_of_program_cases_runs_with_no_allow_ops_and_equals_eager() -> None:
    cases = _built(list(module_cases(_MODULES)), len(_MODULES))
    cases += _built(list(functional_cases(_FUNCTIONS)), len(_FUNCTIONS))
    cases += _built(list(loss_cases(_LOSSES)), 2 * len(_LOSSES))  # the module and its functional form
    table = core_aten_table()  # torch's default table, built once for the 14 cases, not in each run_decompositions
    for case in cases:
        for outcome in run_program_case(case, table):
            assert outcome.status == "ok", (case.name, outcome.how, outcome.status, outcome.refused, outcome.detail)


@pytest.mark.slow
def test_a_sample_of_recorded_training_steps_replays_with_no_allow_ops() -> None:
    cases = [c for c in training_cases() if c.name in _TRAINING]
    assert sorted(c.name for c in cases) == sorted(_TRAINING)
    for case in cases:
        for outcome in run_recorded_case(case):
            assert outcome.status == "ok", (case.name, outcome.how, outcome.status, outcome.refused, outcome.detail)


@pytest.mark.slow
@pytest.mark.xdist_group("transformers")  # one worker imports transformers (~3 CPU-s) for the three
def test_a_sample_of_model_library_architectures_runs_with_no_allow_ops_and_equals_eager() -> None:
    pytest.importorskip("transformers")
    cases = _built(list(hf_cases(_TRANSFORMERS)), len(_TRANSFORMERS))
    if importlib.util.find_spec("diffusers") is not None:
        cases += _built(list(diffusers_cases(_DIFFUSERS)), len(_DIFFUSERS))
    table = core_aten_table()  # after transformers registered its ops, as each run_decompositions() would build it
    for case in cases:
        outcomes = run_program_case(case, table)
        assert [o.how for o in outcomes] == ["training IR", "core ATen IR"], (case.name, outcomes)
        for outcome in outcomes:
            assert outcome.status == "ok", (case.name, outcome.how, outcome.status, outcome.refused, outcome.detail)


@pytest.mark.slow
@pytest.mark.xdist_group("transformers")  # one worker imports transformers (~3 CPU-s) for the three
def test_a_sample_of_recorded_model_forward_and_backward_replays_with_no_allow_ops() -> None:
    pytest.importorskip("transformers")
    cases = [c for c in model_training_cases(_RECORDED) if c.category.startswith("transformers")]
    assert sorted(c.name for c in cases) == sorted(_RECORDED)
    for case in cases:
        outcomes = run_recorded_case(case)
        assert [o.how for o in outcomes] == ["replay chained", "replay isolated"], (case.name, outcomes)
        for outcome in outcomes:
            assert outcome.status == "ok", (case.name, outcome.how, outcome.status, outcome.refused, outcome.detail)


@pytest.mark.slow
@pytest.mark.xdist_group("transformers")  # one worker imports transformers (~3 CPU-s) for the three
def test_a_recorded_moe_forward_and_backward_compares_all_but_its_fresh_buffers() -> None:
    pytest.importorskip("transformers")
    import opwire
    from opwire.recording.definedness import UNDEFINED

    (case,) = [c for c in model_training_cases(("qwen3_moe",)) if c.category.startswith("transformers")]
    assert case.work is not None
    with opwire.record() as trace:
        case.work()
    uncompared = {r.target for r in trace.records if UNDEFINED in r.metadata}
    # the routing's inv = empty_like(perm); inv[perm] = arange(n) defines all of inv: only the empty_like itself
    assert uncompared == {"aten::empty_like.default"}, uncompared


def test_without_the_model_libraries_their_corpus_is_empty(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.import_module

    def absent(name: str, package: str | None = None) -> object:
        if name in ("transformers", "diffusers"):
            raise ImportError(f"No module named {name!r}")
        return real(name, package)

    monkeypatch.setattr(importlib, "import_module", absent)
    assert list(hf_cases()) == [] and list(diffusers_cases()) == [] and list(model_training_cases()) == []
