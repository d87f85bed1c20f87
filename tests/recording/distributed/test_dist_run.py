"""A 2-rank gloo job recorded through torchrun: headers, collectives as calls, ranks, replay (both ways), diff."""

from __future__ import annotations

import json
import re
import shutil
import threading
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
import torch
from distrun import JOB, torchrun, torchrun_forked
from support.clirun import Cli

import opwire
from opwire.recording.distributed import replay_run
from opwire.recording.distributed.diff_run import diff_runs
from opwire.recording.distributed.ranks import check_ranks, format_ranks
from opwire.recording.distributed.share import Share
from opwire.recording.launch import rank_file
from opwire.recording.source import StreamSource
from opwire.recording.stream_reader import TraceReader
from opwire.schema import models as m
from opwire.serde import DecodeError

pytestmark = [pytest.mark.slow, pytest.mark.distributed, pytest.mark.xdist_group("distributed")]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cwd = tmp_path_factory.mktemp("dist")
    # ranks started fresh, as torchrun starts them: the suite's one recording whose ranks import torch themselves
    done = torchrun("record", "--out", "run", "--", "python", JOB, cwd=cwd, fresh=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return cwd / "run"


def _copy(run: Path, to: Path) -> Path:
    to.mkdir()
    for p in run.iterdir():
        shutil.copy(p, to / p.name)
    return to


def _tamper(run: Path, to: Path, rank: int, pick: str, delta: float = 0.5) -> str:
    """A copy of `run` whose rank `rank` records a changed result of the first call to `pick`; its name."""
    out = _copy(run, to)
    trace = opwire.load_trace(run / f"rank{rank}.trace")
    for rec in trace:
        if rec.target.startswith(pick):
            names = [n for v in json.loads(rec.metadata.get("mutated", "{}")).values() for n in v]
            names += [a.value.name for a in rec.outputs if a.type == "as_tensor"]
            break
    else:
        raise AssertionError(f"no {pick} call")
    trace.set_tensor(names[-1], trace.tensor(names[-1]) + delta)
    (out / f"rank{rank}.trace").unlink()
    trace.save(out / f"rank{rank}.trace", format="stream")
    return rec.target


def test_every_rank_writes_its_trace_with_the_run_in_its_header(run_dir: Path) -> None:
    headers = [opwire.load_trace(run_dir / f"rank{r}.trace").header.distributed for r in (0, 1)]
    assert [h.rank for h in headers if h] == [0, 1]
    assert {h.world_size for h in headers if h} == {2}
    assert headers[0] is not None and headers[1] is not None
    assert headers[0].run_id and headers[0].run_id == headers[1].run_id
    groups = {g.name: (list(g.ranks), g.backend) for g in headers[0].groups}
    assert groups["0"] == ([0, 1], "gloo") and len(groups) == 2  # the default group and new_group([0, 1])


def test_collectives_are_calls_and_groups_are_references(run_dir: Path) -> None:
    trace = opwire.load_trace(run_dir / "rank1.trace")
    c10d = [r for r in trace if "c10d" in r.target]
    assert not [r.target for r in c10d if "skipped" in r.metadata]
    targets = {r.target.split(".")[0] for r in c10d}
    assert {"c10d::allreduce_", "c10d::allgather_", "c10d::broadcast_", "c10d::alltoall_base_", "c10d::recv_",
            "c10d::barrier", "_c10d_functional::all_reduce"} <= targets  # fmt: skip
    first = next(r for r in c10d if r.target.startswith("c10d::allreduce_"))
    args = {na.name: na.arg for na in first.inputs}
    assert args["process_group"].value == m.CustomObjArgument(
        name="0", class_fqn="__torch__.torch.classes.c10d.ProcessGroup"
    )
    assert args["reduce_op"].value.name == "SUM"


def test_ranks_agree_and_json_is_the_idl_record(run_dir: Path, cli: Cli) -> None:
    done = cli("ranks", run_dir)
    assert done.returncode == 0, done.stderr
    assert "consistent" in done.stdout
    done = cli("ranks", run_dir, "--json")
    report = opwire.loads(done.stdout.encode(), m.RanksReport, format="json")
    assert report.world_size == 2 and report.collectives >= 10 and report.findings == []


def test_isolated_replay_of_every_rank_is_clean(run_dir: Path, cli: Cli) -> None:
    done = cli("replay", run_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no divergence on any rank" in done.stdout


def test_replay_with_real_collectives_under_torchrun(run_dir: Path) -> None:
    done = torchrun("replay", run_dir, "--collectives", "--collective-timeout", "60", "--json", cwd=run_dir.parent)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    report = opwire.loads(done.stdout.encode(), m.RunReplayOutput, format="json")  # rank 0 prints the IDL record
    assert (report.mode, report.ok, report.first_divergence, report.world_size) == ("collectives", True, None, 2)
    assert all(r.mode == "chained" and r.ok and r.replayed for r in report.ranks)
    for rank, r in enumerate(report.ranks):  # the replay's time split after each c10d call, adding up to the whole
        src = StreamSource(rank_file(run_dir, rank))
        ends = [i + 1 for i in range(len(src)) if src.target(i).startswith(("c10d::", "_c10d_functional::"))]
        src.close()
        spans = r.spans or []
        bounds = sorted({0, *ends, r.calls})  # a job ending in a c10d call has no stretch after it
        assert [(s.start, s.stop) for s in spans] == list(pairwise(bounds)) and len(ends) > 3
        assert all(s.seconds >= 0 for s in spans) and sum(s.seconds for s in spans) == pytest.approx(r.seconds)


@pytest.mark.parametrize(
    "pick",
    ["c10d::allreduce_", "c10d::allgather_", "c10d::_allgather_base_", "c10d::_reduce_scatter_base_",
     "c10d::broadcast_", "c10d::alltoall_base_", "c10d::recv_", "_c10d_functional::all_reduce"],
)  # fmt: skip
def test_ranks_names_the_rank_with_a_tampered_collective_output(run_dir: Path, tmp_path: Path, pick: str) -> None:
    target = _tamper(run_dir, tmp_path / "bad", 1, pick)
    report = check_ranks(tmp_path / "bad")
    assert report.findings, pick
    first = report.findings[0]
    assert (first.kind, first.op, first.ranks) == ("numeric", target, [1])


def test_ranks_refuses_a_corrupt_output_payload_equal_in_digest_to_another_rank_s(
    run_dir: Path, tmp_path: Path
) -> None:
    """Rank 1's all-reduce result has rank 0's digest: its bytes are compared with rank 0's checked ones, not hashed;
    a flipped byte makes them differ, and they are then hashed and refused in the words of a corrupt payload."""
    out = _copy(run_dir, tmp_path / "bad")
    with TraceReader(run_dir / "rank1.trace") as reader:
        rec = next(r for r in reader.records() if r.target.startswith("c10d::allreduce_"))
        name = [n for v in json.loads(rec.metadata.get("mutated", "{}")).values() for n in v][-1]
        entry = reader._index.tensors[name]
        assert entry.payload is not None
        offset, _ = reader._index.payloads[entry.payload]
    data = bytearray((out / "rank1.trace").read_bytes())
    data[offset] ^= 0xFF
    (out / "rank1.trace").write_bytes(bytes(data))
    assert not check_ranks(run_dir).findings
    with pytest.raises(DecodeError, match=r"rank1\.trace: tensors\[.+\]: the payload's bytes do not match its SHA-256"):
        check_ranks(out)


def test_ranks_names_the_first_desynchronizing_collective(run_dir: Path, tmp_path: Path, cli: Cli) -> None:
    out = _copy(run_dir, tmp_path / "desync")
    trace = opwire.load_trace(run_dir / "rank1.trace").model
    drop = next(i for i, r in enumerate(trace.records) if r.target.startswith("c10d::broadcast_"))
    del trace.records[drop]
    (out / "rank1.trace").write_bytes(opwire.dumps(trace, format="compact"))
    done = cli("ranks", out)
    assert done.returncode == 1, done.stderr
    assert "sequence: group 0 collective #5: rank 1" in done.stdout
    assert "c10d::alltoall_base_" in done.stdout and "c10d::broadcast_" in done.stdout


def test_diff_names_the_rank_where_two_runs_part(run_dir: Path, tmp_path: Path, cli: Cli) -> None:
    _tamper(run_dir, tmp_path / "b", 1, "aten::mul", delta=1e-3)
    result = diff_runs(run_dir, tmp_path / "b")
    rank, first = result.divergences()[0]
    assert rank == 1 and "aten::mul" in first.op and first.origin == "local"  # its recorded value was changed
    done = cli("diff", run_dir, tmp_path / "b")
    assert done.returncode == 1 and "  rank 1, local: call " in done.stdout
    assert cli("diff", run_dir, run_dir).returncode == 0


def test_diff_of_runs_from_frames_is_the_records_diff(run_dir: Path, tmp_path: Path) -> None:
    _tamper(run_dir, tmp_path / "b", 1, "aten::mul", delta=1e-3)
    for other in (_copy(run_dir, tmp_path / "copy"), tmp_path / "b"):
        fast = diff_runs(run_dir, other, origins=False)  # both runs' frames compared as bytes where they agree
        for rank, found in enumerate(fast.ranks):
            a, b = (StreamSource(rank_file(r, rank)) for r in (run_dir, other))
            try:  # the records' comparison: a reader that builds every record and tensor
                full = opwire.diff_traces(opwire.Trace(source=a), opwire.Trace(source=b), origins=False)
            finally:
                a.close()
                b.close()
            assert found.to_dict() == full.to_dict()
            assert found.ok == (other.name == "copy" or rank == 0)


def _bad(run_dir: Path, tmp_path: Path, how: str) -> Path:
    out = _copy(run_dir, tmp_path / how)
    if how == "missing":
        (out / "rank1.trace").unlink()
    elif how == "truncated":
        data = (out / "rank1.trace").read_bytes()
        (out / "rank1.trace").write_bytes(data[: len(data) // 2])
    elif how in ("run_id", "world_size"):
        trace = opwire.load_trace(run_dir / "rank1.trace").model
        d = trace.header.distributed
        assert d is not None
        if how == "run_id":
            d.run_id = "another-run"
        else:
            d.world_size = 3
        (out / "rank1.trace").write_bytes(opwire.dumps(trace, format="compact"))
    elif how == "single":
        with opwire.record() as trace:
            torch.ones(2).add(1)
        for p in out.iterdir():
            p.unlink()
        trace.save(out / "rank0.trace")
    return out


@pytest.mark.parametrize(
    ("how", "message"),
    [
        ("missing", "rank1.trace: missing; rank0.trace says the run has 2 ranks"),
        ("truncated", "rank1.trace: the trace is cut at byte"),
        ("run_id", "rank1.trace: run id 'another-run', rank0.trace has"),
        ("world_size", "rank1.trace: world size 3, rank0.trace says 2"),
        ("single", "rank0.trace: a trace of a single-process run"),
    ],
)
def test_bad_runs_are_one_clear_error(run_dir: Path, tmp_path: Path, cli: Cli, how: str, message: str) -> None:
    bad = _bad(run_dir, tmp_path, how)
    done = cli("ranks", bad)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    for read in (check_ranks, replay_run, lambda p: diff_runs(run_dir, p)):
        with pytest.raises(DecodeError, match=re.escape(message)):
            read(bad)


def test_a_single_trace_where_a_run_is_expected(run_dir: Path, cli: Cli) -> None:
    done = cli("ranks", run_dir / "rank0.trace")
    assert done.returncode == 2
    assert "expected a run directory holding rank0.trace" in done.stderr and "it is a single trace" in done.stderr


def test_a_failing_rank_gives_rank_0s_report_and_one_line_under_collectives(run_dir: Path, tmp_path: Path) -> None:
    """Rank 1's trace lacks the barrier: rank 0 waits in it and times out. What opwire prints is rank 0's report
    (stdout) and one line (stderr); every rank but rank 0 exits 0 once rank 0 has reported, so torchrun's own
    summary (which no rank can suppress once one exits non-zero) names rank 0 alone."""
    out = _copy(run_dir, tmp_path / "stuck")
    trace = opwire.load_trace(run_dir / "rank1.trace").model
    barrier = next(i for i, r in enumerate(trace.records) if r.target.startswith("c10d::barrier"))
    trace.records = [r for r in trace.records if not r.target.startswith("c10d::barrier")]
    (out / "rank1.trace").write_bytes(opwire.dumps(trace, format="compact"))
    # 4 s: long enough for both ranks to start under load, short enough not to idle a test worker
    done = torchrun("replay", out, "--collectives", "--collective-timeout", "4", cwd=tmp_path, timeout=240)
    assert done.returncode == 1  # torchrun's own code for any failed rank
    assert done.stdout.startswith(f"{out}: 2 ranks replayed (collectives)\n"), done.stdout + done.stderr[-3000:]
    assert f"first divergence overall: rank 0, call {barrier} c10d::barrier.default" in done.stdout
    assert "sequence: group 0 collective #" in done.stdout  # the collectives check says why: rank 1 never called it
    ours = [ln for ln in done.stderr.splitlines() if not ln.startswith(("E1", "W1", "I1")) and "torch" not in ln]
    ours = ours[: next((k for k, ln in enumerate(ours) if ln.startswith("Traceback")), len(ours))]
    assert len(ours) == 1, done.stderr
    assert ours[0].startswith(f"opwire replay: error: rank 0: stopped at call {barrier} (c10d::barrier.default): ")
    assert "Timed out waiting 4000ms" in ours[0] and "unbound_buffer.cc" not in ours[0]
    assert done.stderr.count("Traceback") == 1  # torchrun's, not a rank's
    summary = done.stderr[done.stderr.index("ChildFailedError") :]
    assert "<NO_OTHER_FAILURES>" in summary and "rank      : 0 (local_rank: 0)" in summary, summary


def test_ranks_diff_and_replay_print_the_same_split_over_torchrun(run_dir: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    _tamper(run_dir, bad, 1, "c10d::allreduce_")
    commands = [("ranks", ["ranks", bad], {}), ("diff", ["diff", bad, run_dir], {}), ("replay", ["replay", bad], {})]
    done = torchrun_forked(commands, cwd=tmp_path)  # one launch, the three commands
    alone = {
        "ranks": (1, format_ranks(check_ranks(str(bad)), str(bad))),
        "diff": (1, str(diff_runs(str(bad), str(run_dir), isolate=True))),
        "replay": (1, str(replay_run(str(bad)))),
    }
    for name, (code, text) in alone.items():
        first, second = done[name]
        assert (first.returncode, first.stdout) == (code, text + "\n"), (name, first.stderr[-2000:])
        assert (second.returncode, second.stdout) == (code, ""), name  # process 1 prints nothing


def _split(run: Path, count: int) -> list[m.RanksReport]:
    """`check_ranks` of `run` by `count` shares in threads of this process, gathering JSON through each other as
    torchrun's processes do over gloo; each share's report."""
    parts: list[Any] = [None] * count
    meet = threading.Barrier(count, timeout=120)
    reports: list[Any] = [None] * count

    def work(k: int) -> None:
        def gather(data: Any) -> list[Any]:
            parts[k] = json.loads(json.dumps(data))  # what crosses between processes is JSON
            meet.wait()
            out = list(parts)
            meet.wait()
            return out

        try:
            reports[k] = check_ranks(run, share=Share(k, count, gather))
        except BaseException as e:  # the others then stop at the barrier, broken
            reports[k] = e
            meet.abort()

    threads = [threading.Thread(target=work, args=(k,)) for k in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r in reports:
        if isinstance(r, BaseException):
            raise r
    return reports


@pytest.mark.parametrize("how", ["clean", "c10d::allreduce_", "c10d::recv_", "c10d::broadcast_"])
def test_ranks_by_several_processes_is_one_report_and_each_file_is_scanned_once(
    run_dir: Path, tmp_path: Path, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = run_dir
    if how != "clean":
        run = tmp_path / "bad"
        _tamper(run_dir, run, 1, how)
    alone = check_ranks(run)
    assert bool(alone.findings) == (how != "clean")
    scanned: list[str] = []
    scan = TraceReader._scan

    def counted(self: TraceReader) -> Any:
        scanned.append(self.path.name)
        return scan(self)

    monkeypatch.setattr(TraceReader, "_scan", counted)
    for count in (2, 3):
        scanned.clear()
        assert _split(run, count) == [alone] * count
        assert sorted(scanned) == ["rank0.trace", "rank1.trace"]  # by its owner alone; the others read its index
