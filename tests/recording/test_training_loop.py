"""A real training loop recorded and replayed with nothing skipped, and diff/replay telling the truth about it.

The loop is what every training script does: AdamW, dropout, `randint` batches, `randperm` with a caller's
generator, `tril_indices`, and an `empty` buffer. Recording keeps every call (enum defaults torch prints as
c10 numbers are read; a generator's draw is marked); replay and diff compare the random and uninitialised
calls by metadata, so two recordings of one deterministic script agree and a real difference comes first.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch
from support.clirun import Cli

import opwire
from opwire.recording.arguments import c10_enum, default_value
from opwire.recording.compare import GENERATOR_KEY, reproducible
from opwire.schema.opschema import op_schema

SCRIPT = """
import sys
import torch

lr = LR if "LR" in globals() else float(sys.argv[1])
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Dropout(0.1), torch.nn.Linear(16, 4))
opt = torch.optim.AdamW(model.parameters(), lr=lr)
data, labels = torch.randn(64, 8), torch.randint(0, 4, (64,))
g = torch.Generator().manual_seed(1)
for step in range(2):
    idx = torch.randint(0, 64, (16,))
    perm = torch.randperm(16, generator=g)
    scratch = torch.empty(16, 4).fill_(1.0)
    x, y = data[idx][perm], labels[idx][perm]
    loss = torch.nn.functional.cross_entropy(model(x), y) + 0 * scratch.sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
torch.tril_indices(3, 3)
"""


def _train(lr: float = 1e-3) -> opwire.Trace:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a skipped call warns: none may
        with opwire.record() as trace:
            exec(compile(SCRIPT, "train.py", "exec"), {"__name__": "train", "LR": lr})
    return trace


def test_enum_defaults_printed_as_numbers_are_read() -> None:
    schema = op_schema(torch.ops.aten.randint.default)
    dtype = next(a for a in schema.arguments if a.name == "dtype")
    assert dtype.default_str == "4"
    assert default_value(dtype) is torch.int64
    assert c10_enum("ScalarType")[6] is torch.float32
    assert c10_enum("Layout")[0] is torch.strided
    assert c10_enum("MemoryFormat")[0] is torch.contiguous_format


def test_a_training_loop_records_and_replays_with_nothing_skipped(replay_mode: str) -> None:
    trace = _train()
    targets = {r.target for r in trace.records}
    assert {"aten::randint.low", "aten::randperm.generator", "aten::tril_indices.default"} <= targets, targets
    assert not [r for r in trace.records if "skipped" in r.metadata]
    drawn = [r for r in trace.records if GENERATOR_KEY in r.metadata]
    assert drawn and all(r.target == "aten::randperm.generator" for r in drawn)
    assert all(r.metadata[GENERATOR_KEY] == "generator" for r in drawn)
    report = opwire.replay(trace, mode=replay_mode, progress=False)  # type: ignore[arg-type]
    assert report.ok and report.complete and not report.skipped, str(report)
    assert report.replayed == len(trace)


def test_seeded_and_uninitialised_ops_share_one_rule() -> None:
    assert not reproducible("aten::randint.low")
    assert not reproducible("aten::empty.memory_format")
    assert not reproducible("aten::native_dropout.default")
    assert reproducible("aten::addmm.default")
    assert not reproducible("aten::addmm.default", {GENERATOR_KEY: "generator"})


def test_two_recordings_of_one_script_agree_and_a_real_difference_comes_first(tmp_path: Path) -> None:
    a, b, c = tmp_path / "a.trace", tmp_path / "b.trace", tmp_path / "c.trace"
    _train().save(a)
    _train().save(b)
    _train(lr=0.5).save(c)
    same = opwire.diff_traces(opwire.load_trace(a), opwire.load_trace(b))
    assert same.ok, str(same)
    assert str(same).startswith(f"A {a} (")
    other = opwire.diff_traces(opwire.load_trace(a), opwire.load_trace(c))
    assert not other.ok
    first = other.first_divergence
    assert first is not None and "empty" not in first.op and "rand" not in first.op
    text = str(other)
    assert "expected" not in text and " got " not in text


def test_one_difference_is_singular(tmp_path: Path) -> None:
    def run(k: float) -> opwire.Trace:
        x = torch.full((3,), k)
        with opwire.record() as t:
            x.exp()
        return t

    text = str(opwire.diff_traces(run(1.0), run(2.0)))
    assert "1 difference," in text and "(1 call)" in text
    assert ": A 2.718281" in text and ", B 7.389056" in text


@pytest.mark.slow
def test_cli_records_diffs_and_replays_the_loop(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(SCRIPT)
    for name, lr in (("a.trace", "0.001"), ("b.trace", "0.001"), ("c.trace", "0.5")):
        done = cli("record", "--out", name, "--", "python", "train.py", lr)
        assert done.returncode == 0, done.stderr
        assert "skipped" not in done.stderr
    same = cli("diff", "a.trace", "b.trace")
    assert same.returncode == 0, same.stdout + same.stderr
    assert same.stdout.startswith("A a.trace (") and "the traces agree" in same.stdout
    other = cli("diff", "a.trace", "c.trace")
    assert other.returncode == 1
    first = next(line for line in other.stdout.splitlines() if line.startswith("first local divergence:"))
    assert "empty" not in first and "rand" not in first
    clean = cli("replay", "a.trace")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "0 skipped" in clean.stdout and "matched (--verbose shows the per-op table)" in clean.stdout
    assert "per op:" not in clean.stdout
    assert "per op:" in cli("replay", "a.trace", "--verbose").stdout


@pytest.mark.parametrize("replay_mode", ["chained", "isolated"])
def test_a_skipped_call_that_writes_a_weight_leaves_later_reads_recorded_whole(replay_mode: str) -> None:
    """SparseAdam adds a sparse update into the dense weight: the call is skipped (no Argument carries a sparse
    tensor), so its write happens outside the trace, and the next read of the weight is a new value with its
    bytes, not the stale first one (replay compared the next embedding against the weight before the step)."""
    torch.manual_seed(0)
    emb = torch.nn.Embedding(10, 8, sparse=True)
    opt = torch.optim.SparseAdam(emb.parameters(), lr=0.01)
    x = torch.randint(0, 10, (4, 2))
    with warnings.catch_warnings(), opwire.record() as trace:
        warnings.simplefilter("ignore")  # the skipped sparse calls warn once each
        for _ in range(2):
            opt.zero_grad()
            emb(x).pow(2).sum().backward()
            opt.step()
    report = opwire.replay(trace, mode=replay_mode)
    assert report.skipped and not report.mismatches, str(report)
