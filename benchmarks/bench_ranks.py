"""Distributed runs on gloo (2 and 4 ranks, one machine): recording overhead, `ranks`/`diff` throughput, replay.

Per world size, all under torchrun: a data-parallel MLP job (forward, backward, gradients averaged with
`all_reduce`, SGD step) run eager and recorded (`-m opwire record`); each rank times its own training loop,
so the ratio recorded/eager is the recording overhead per rank. Then, in this process, `opwire ranks`
(`check_ranks`) and `opwire diff` (`diff_runs`, the run against a copy of itself) over the recorded run, in MB
of trace per second; last, `torchrun -m opwire replay RUN --collectives`, each rank's chained replay time
against its eager loop time. Run once; the figures depend on the machine's load.

    python benchmarks/bench_ranks.py [--steps N] [--worlds 2 4]
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


def main() -> None:
    """Run the benchmark once per world size."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--worlds", type=int, nargs="+", default=[2, 4])
    args = parser.parse_args()
    for world in args.worlds:
        with tempfile.TemporaryDirectory(prefix="opwire-ranks-") as tmp:
            bench(world, args.steps, Path(tmp))


if __name__ == "__main__":
    main()
