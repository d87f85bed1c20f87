"""DDP as users run it (plain, static_graph, no_sync accumulation; AdamW), 2 gloo ranks: verdicts to trust.

Three recordings (two identical, one with rank 1 perturbed) are made once per module by torchrun. DDP allocates
its gradient buckets with `empty`, takes views of them, and fills an int64 `empty` through a raw pointer before
its first collective: none of that may show as a difference, in diff or in replay.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from distrun import torchrun
from support.clirun import Cli

import opwire
from opwire.recording.distributed.diff_run import diff_runs
from opwire.recording.distributed.replay_run import replay_run
from opwire.recording.stream import TraceReader
from opwire.recording.trace_diff import CallDifference, OnlyIn
from opwire.schema import models as m

pytestmark = [pytest.mark.slow, pytest.mark.distributed, pytest.mark.xdist_group("distributed")]

JOB = Path(__file__).with_name("ddp_job.py")
PERTURBED = next(k for k, line in enumerate(JOB.read_text().splitlines(), 1) if line.endswith("# PERTURBED"))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cwd = tmp_path_factory.mktemp("ddp")
    (cwd / JOB.name).write_text(JOB.read_text())
    for out, env in (("a", {}), ("b", {}), ("perturbed", {"PERTURB": "1"})):
        done = torchrun("record", "--out", out, "--", "python", JOB.name, cwd=cwd, env=env)
        assert done.returncode == 0, done.stderr[-3000:]
        assert "skipped" not in done.stderr, done.stderr[-3000:]
    return cwd


def test_two_identical_ddp_runs_diff_clean(runs: Path, cli: Cli) -> None:
    result = diff_runs(runs / "a", runs / "b")
    assert result.ok, str(result)
    done = cli("diff", runs / "a", runs / "b")
    assert done.returncode == 0 and "every rank agrees" in done.stdout, done.stdout + done.stderr


def test_the_perturbed_rank_and_line_are_the_headline(runs: Path, cli: Cli) -> None:
    result = diff_runs(runs / "a", runs / "perturbed")
    (r1, head1), (r0, head0) = result.divergences()
    assert r1 == 1 and isinstance(head1, OnlyIn) and head1.side == "B" and head1.op == "aten::add.Tensor"
    assert head1.source == f"{JOB.name}:{PERTURBED} in train"
    # rank 0 computed nothing differently: what differs there came through a collective from rank 1
    assert r0 == 0 and isinstance(head0, CallDifference) and head0.origin == "inherited from rank 1"
    assert head0.op == "c10d::allreduce_.default"
    rank0 = result.ranks[0]
    assert rank0.first_local is None and not rank0.only_a and not rank0.only_b
    assert {d.origin for d in rank0.differences} <= {"inherited", "inherited from rank 1", ""}
    # on rank 1 every call it made in both runs differs only through its inputs; the local ones are the additions
    assert not [d for d in result.ranks[1].differences if d.origin == "local"]
    assert [o.source for o in result.ranks[1].only_b] == [f"{JOB.name}:{PERTURBED} in train"] * 3
    # every difference is labelled (the policy admits what DDP's reducer runs), and none falsely local
    assert all(d.origin.startswith("inherited") for r in result.ranks for d in r.differences)
    done = cli("diff", runs / "a", runs / "perturbed", "--json")
    assert done.returncode == 1
    report = opwire.loads(done.stdout.encode(), m.RunDiffOutput, format="json")
    assert [(d.rank, d.origin) for d in report.divergences] == [(1, "local"), (0, "inherited from rank 1")]


def test_ddp_buckets_are_written_without_payload_until_filled(runs: Path) -> None:
    """The bucket views DDP takes of `empty` memory hold no defined byte: the traces keep their layout, no bytes."""
    for rank in (0, 1):
        with TraceReader(runs / "a" / f"rank{rank}.trace") as reader:
            marked = [n for n in reader.names() if reader.undefined(n)]
            assert marked and all(reader.nbytes(n) == 0 for n in marked)
            views = {reader.meta(n).storage_offset for n in marked}  # type: ignore[union-attr]
            assert len(views) > 1  # several parameters' views of one bucket


def test_a_ddp_run_replays_clean_isolated(runs: Path) -> None:
    report = replay_run(runs / "a")
    assert report.ok and all(r.replayed for r in report.ranks), str(report)


def test_a_ddp_run_replays_clean_with_real_collectives(runs: Path) -> None:
    done = torchrun("replay", "a", "--collectives", "--collective-timeout", "60", "--json", cwd=runs)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    report = opwire.loads(done.stdout.encode(), m.RunReplayOutput, format="json")
    assert (report.mode, report.ok, report.first_divergence) == ("collectives", True, None)
