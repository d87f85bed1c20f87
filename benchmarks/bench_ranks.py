"""Distributed runs on gloo (2 and 4 ranks, one machine): recording overhead, `ranks`/`diff` throughput, replay.

Throughput first: two 4-rank runs are recorded under /tmp, one with large payloads (a 2048x2048 gradient
all-reduced per step) and one with many small tensors (the MLP below), and a copy of each. Each is read whole
(every file through one reused buffer, best of 3: the speed of reading the files, page cache warm), then checked
with `ranks` and diffed against its copy with `diff` by 1, 2 and 4 processes (1: in this process; 2 and 4:
under torchrun, each process timing the same work after joining the group, startup excluded), best of 2, in MB
of trace per second (diff: both runs' bytes) and as a fraction of the reading speed, and in MB per CPU-second
(the CPU time of every process and thread, summed: the figure a loaded machine does not distort, and the one to
compare across process counts when there are more processes than cores, as the output then says).

Per world size, all under torchrun: a data-parallel MLP job (forward, backward, gradients averaged with
`all_reduce`, SGD step) run eager and recorded (`-m opwire record`); each rank times its own training loop,
so the ratio recorded/eager is the recording overhead per rank. Then, in this process, `opwire ranks`
(`check_ranks`) and `opwire diff` (`diff_runs`, the run against a copy of itself) over the recorded run, in MB
of trace per second; last, `torchrun -m opwire replay RUN --collectives`, each rank's chained replay time
against its eager loop time. Run once; the figures depend on the machine's load.

    python benchmarks/bench_ranks.py [--steps N] [--worlds 2 4] [--procs 1 2 4] [--skip-throughput]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from opwire.recording.distributed.diff_run import diff_runs
from opwire.recording.distributed.ranks import check_ranks

LARGE = """
import sys
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
w = torch.randn(2048, 2048)
torch.manual_seed(1 + rank)
for _ in range(int(sys.argv[1])):
    x = torch.randn(256, 2048)
    g = (x @ w).relu().t() @ x
    dist.all_reduce(g, op=dist.ReduceOp.AVG)
    w = w - 0.01 * g
dist.destroy_process_group()
"""

WORKER = """
import sys, time
from opwire.recording.distributed.diff_run import diff_runs
from opwire.recording.distributed.ranks import check_ranks
from opwire.recording.distributed.share import launched_share

run, copy = sys.argv[1], sys.argv[2]
with launched_share() as share:
    share.gather(0)  # every process has joined: time the work alone
    best = [float("inf")] * 4  # wall ranks, wall diff, CPU ranks, CPU diff (the CPU of every process)
    for _ in range(2):
        start, cpu = time.perf_counter(), time.process_time()
        assert not check_ranks(run, share=share).findings
        cpus = share.gather(time.process_time() - cpu)
        best[0], best[2] = min(best[0], time.perf_counter() - start), min(best[2], sum(cpus))
        start, cpu = time.perf_counter(), time.process_time()
        assert diff_runs(run, copy, share=share).ok
        cpus = share.gather(time.process_time() - cpu)
        best[1], best[3] = min(best[1], time.perf_counter() - start), min(best[3], sum(cpus))
    if share.prints:
        print("TIMES " + " ".join(f"{x:.6f}" for x in best), flush=True)
"""

JOB = """
import sys, time
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
steps = int(sys.argv[1])
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(128, 512), torch.nn.ReLU(), torch.nn.Linear(512, 128))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
torch.manual_seed(1 + rank)
data = [torch.randn(32, 128) for _ in range(steps)]
dist.barrier()
start = time.perf_counter()
for x in data:
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    for p in model.parameters():
        dist.all_reduce(p.grad, op=dist.ReduceOp.AVG)
    opt.step()
print(f"JOBTIME {rank} {time.perf_counter() - start:.6f}", flush=True)
dist.destroy_process_group()
"""

_ROOT = Path(__file__).resolve().parents[1]


def _torchrun(world: int, args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env["PYTHONPATH"] = os.pathsep.join([str(_ROOT), *filter(None, [env.get("PYTHONPATH")])])
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(world), *args]
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"torchrun {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return done


def _job_times(out: str) -> dict[int, float]:
    return {int(r): float(t) for r, t in re.findall(r"JOBTIME (\d+) ([0-9.]+)", out)}


def _mb(run: Path) -> float:
    return sum(p.stat().st_size for p in run.iterdir()) / 1e6


def bench(world: int, steps: int, tmp: Path) -> None:
    (tmp / "job.py").write_text(JOB)
    eager = _job_times(_torchrun(world, ["job.py", str(steps)], tmp).stdout)
    recorded = _job_times(
        _torchrun(world, ["-m", "opwire", "record", "--out", "run", "--", "job.py", str(steps)], tmp).stdout
    )
    ratios = [recorded[r] / eager[r] for r in sorted(eager)]
    run = tmp / "run"
    size = _mb(run)
    start = time.perf_counter()
    report = check_ranks(run)
    t_ranks = time.perf_counter() - start
    shutil.copytree(run, tmp / "copy")
    start = time.perf_counter()
    diff = diff_runs(run, tmp / "copy")
    t_diff = time.perf_counter() - start
    assert not report.findings and diff.ok
    replay = _torchrun(world, ["-m", "opwire", "replay", "run", "--collectives", "--json"], tmp).stdout
    data = json.loads(replay[replay.index("{") :])
    replay_ratio = [data["ranks"][r]["seconds"] / eager[r] for r in sorted(eager)]
    print(f"world {world}, {steps} steps, trace {size:.1f} MB ({size / world:.1f} MB per rank)")
    print(f"  record overhead per rank (recorded loop / eager loop): {', '.join(f'{x:.1f}x' for x in ratios)}")
    print(f"  opwire ranks: {t_ranks:.2f} s, {size / t_ranks:.1f} MB/s of trace ({report.collectives} collectives)")
    print(f"  opwire diff:  {t_diff:.2f} s, {2 * size / t_diff:.1f} MB/s of trace (both runs)")
    print(f"  replay --collectives per rank / eager loop: {', '.join(f'{x:.1f}x' for x in replay_ratio)}")


def _read_speed(run: Path) -> float:
    """MB/s reading every file of `run` through one reused buffer (best of 3)."""
    buf = memoryview(bytearray(1 << 20))
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for p in sorted(run.iterdir()):
            with open(p, "rb", buffering=0) as f:
                while f.readinto(buf):
                    pass
        best = min(best, time.perf_counter() - start)
    return _mb(run) / best


def _in_process(run: Path, copy: Path) -> list[float]:
    """Best of 2: wall seconds of `ranks` and `diff`, then their CPU seconds (every thread of this process)."""
    best = [float("inf")] * 4
    for _ in range(2):
        start, cpu = time.perf_counter(), time.process_time()
        assert not check_ranks(run).findings
        best[0], best[2] = min(best[0], time.perf_counter() - start), min(best[2], time.process_time() - cpu)
        start, cpu = time.perf_counter(), time.process_time()
        assert diff_runs(run, copy).ok
        best[1], best[3] = min(best[1], time.perf_counter() - start), min(best[3], time.process_time() - cpu)
    return best


def throughput(kind: str, job: str, steps: int, procs: list[int], tmp: Path) -> None:
    """MB/s of `ranks` and `diff` on a 4-rank run for each process count, against reading the files."""
    (tmp / "job.py").write_text(job)
    _torchrun(4, ["-m", "opwire", "record", "--out", "run", "--", "job.py", str(steps)], tmp)
    run, copy = tmp / "run", tmp / "copy"
    shutil.copytree(run, copy)
    (tmp / "worker.py").write_text(WORKER)
    size, read = _mb(run), _read_speed(run)
    print(f"{kind} run: 4 ranks, {size:.0f} MB; reading the files: {read:.0f} MB/s")
    for p in procs:
        if p == 1:
            t_ranks, t_diff, cpu_ranks, cpu_diff = _in_process(run, copy)
        else:
            out = _torchrun(p, ["worker.py", str(run), str(copy)], tmp).stdout
            t_ranks, t_diff, cpu_ranks, cpu_diff = (float(x) for x in re.findall(r"TIMES ([0-9. ]+)", out)[0].split())
        r, d = size / t_ranks, 2 * size / t_diff
        print(
            f"  {p} process{'es' if p > 1 else ''}: ranks {r:.0f} MB/s ({r / p:.0f} per process, {r / read:.2f}x "
            f"reading; {size / cpu_ranks:.0f} MB per CPU-second), diff {d:.0f} MB/s ({d / p:.0f} per process, "
            f"{d / read:.2f}x reading; {2 * size / cpu_diff:.0f} MB per CPU-second)"
        )
    cores = len(os.sched_getaffinity(0))
    if max(procs) > cores:
        print(
            f"  (on {cores} cores, {max(procs)} processes get {cores / max(procs):.2g} of a core each: their MB/s per "
            "process is capped by the cores, and MB per CPU-second is the figure to compare across process counts)"
        )


def main() -> None:
    """Run the benchmark once per world size."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--worlds", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--procs", type=int, nargs="+", default=[1, 2, 4], help="process counts for ranks/diff")
    parser.add_argument("--skip-throughput", action="store_true", help="only recording overhead and replay")
    args = parser.parse_args()
    if not args.skip_throughput:
        for kind, job, steps in (("large-payload", LARGE, 2), ("small-tensor", JOB, 40)):
            with tempfile.TemporaryDirectory(prefix="opwire-ranks-") as tmp:
                throughput(kind, job, steps, args.procs, Path(tmp))
    for world in args.worlds:
        with tempfile.TemporaryDirectory(prefix="opwire-ranks-") as tmp:
            bench(world, args.steps, Path(tmp))


if __name__ == "__main__":
    main()
