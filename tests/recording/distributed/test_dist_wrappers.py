"""The distributed wrappers users run, 2 gloo ranks, AdamW each: verdicts to trust.

DDP (plain, static_graph, no_sync accumulation), FSDP2 (`fully_shard`) and a tensor-parallel MLP
(`parallelize_module`) train in one job; three recordings of it (two identical, one with rank 1 perturbed) are
made once per module by torchrun. DDP allocates its gradient buckets with `empty`, takes views of them, and
fills an int64 `empty` through a raw pointer before its first collective; FSDP2 frees and re-allocates its
unsharded parameters with `untyped_storage().resize_`, outside the dispatcher, and wraps them in parameters the
recording first meets as inputs; DTensor runs its ops on local shards below the recorder's mode. None of that
may show as a difference, in diff or in replay.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from distrun import torchrun, torchrun_forked
from support.clirun import Cli

import opwire
from opwire.recording.distributed import replay_run
from opwire.recording.distributed.diff_run import diff_runs
from opwire.recording.origin import MAX_CHECKED
from opwire.recording.stream_reader import TraceReader
from opwire.recording.trace_diff import CallDifference, OnlyIn
from opwire.schema import models as m

pytestmark = [pytest.mark.slow, pytest.mark.distributed, pytest.mark.xdist_group("distributed")]

JOB = Path(__file__).with_name("wrappers_job.py")
RUNS = {"a": {}, "b": {}, "perturbed": {"PERTURB": "1"}}  # run directory -> the job's environment beyond torchrun's
PERTURBED = next(k for k, line in enumerate(JOB.read_text().splitlines(), 1) if line.endswith("# PERTURBED"))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cwd = tmp_path_factory.mktemp("ddp")
    (cwd / JOB.name).write_text(JOB.read_text())
    # one launch records the three runs, each by `opwire record` forked from a process that imported torch and the
    # CLI once; test_dist_run and the distributed tutorial launch `torchrun -m opwire record` itself
    commands = [(out, ["record", "--out", out, "--", "python", JOB.name], env) for out, env in RUNS.items()]
    for out, by_rank in torchrun_forked(commands, cwd).items():
        for rank, done in enumerate(by_rank):
            assert done.returncode == 0, f"{out}, rank {rank}: {done.stderr[-3000:]}"
            assert "skipped" not in done.stderr, done.stderr[-3000:]
            assert f"-> {out}/rank{rank}.trace" in done.stderr, done.stderr[-3000:]
    return cwd


def test_dtensor_calls_are_recorded_on_their_local_shards(runs: Path) -> None:
    trace = opwire.load_trace(runs / "a" / "rank0.trace")
    targets = [r.target for r in trace.records]
    # AdamW's update of every parameter in 5 loops of 2 steps (4 parameters each): DTensor ones included
    assert targets.count("aten::addcdiv_.default") == 5 * 2 * 4
    for op in ("fsdp::split_with_sizes_copy.default", "c10d::_reduce_scatter_base_.default"):  # FSDP2
        assert op in targets
    assert "_c10d_functional::all_reduce.default" in targets  # RowwiseParallel's output


def test_two_identical_runs_diff_clean(runs: Path, cli: Cli) -> None:
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
    # one addition in each training loop (3 DDP, FSDP2, tensor parallel): each wrapper's origin is named
    assert [o.source for o in result.ranks[1].only_b] == [f"{JOB.name}:{PERTURBED} in train"] * 5
    # every difference the labelling checks (the first MAX_CHECKED per rank) is inherited; none falsely local
    for r in result.ranks:
        assert all(d.origin.startswith("inherited") for d in r.differences[:MAX_CHECKED])
        assert all(d.origin != "local" for d in r.differences)
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


def test_a_run_replays_clean_isolated(runs: Path) -> None:
    report = replay_run(runs / "a")
    assert report.ok and all(r.replayed for r in report.ranks), str(report)


def test_a_run_replays_clean_with_real_collectives(runs: Path) -> None:
    done = torchrun("replay", "a", "--collectives", "--collective-timeout", "60", "--json", cwd=runs)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    report = opwire.loads(done.stdout.encode(), m.RunReplayOutput, format="json")
    assert (report.mode, report.ok, report.first_divergence) == ("collectives", True, None)
