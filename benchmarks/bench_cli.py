"""`opwire` start-up: each command that executes nothing, in fresh child processes, against two baselines.

Every figure is the best of OPWIRE_BENCH_CLI_REPEAT (default 7) wall times of `python -m opwire ARGS` started
from scratch (and the least CPU time of those runs, which a busy machine inflates less), measured in this run
beside the two baselines: `python -c pass` (the interpreter alone) and
`python -c "import torch"` (what every command paid before the CLI imported only what it runs). The program is
an MLP stack decomposed to core ATen with OPWIRE_BENCH_CLI_NODES (default ~2,000) nodes, saved by
`torch.export.save`. Each command is also run once more to check that torch stays unloaded.

Goals (issue 27): `--help` and `--version` within 0.25 s, `inspect model.pt2` (reads no weight) within 0.5 s at
2,000 nodes, and no command here imports torch.

The commands that run torch are measured against the same job without opwire, in this run: `opwire record -- python
JOB.py` against `python JOB.py` (a job that imports torch and runs one op: what opwire's start-up and recording
add), and, under `torchrun --nproc-per-node 1` (launcher and rank, best of OPWIRE_BENCH_CLI_LAUNCHES, default 3),
`opwire replay RUN --collectives` of a one-collective gloo run against a rank that imports torch and exits.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch import nn

import opwire

REPEAT = int(os.environ.get("OPWIRE_BENCH_CLI_REPEAT", "7"))
LAUNCHES = int(os.environ.get("OPWIRE_BENCH_CLI_LAUNCHES", "3"))
NODES = int(os.environ.get("OPWIRE_BENCH_CLI_NODES", "2000"))
_IDL = str(Path(opwire.__file__).parent / "schema" / "opwire.thrift")
_PROBE = (
    "import sys\nfrom opwire.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
    "sys.stderr.write('\\ntorch-loaded=%d' % ('torch' in sys.modules))"
)


class _Stack(nn.Module):
    """`layers` blocks of linear, relu, scale and residual add (5 core ATen nodes each once decomposed)."""

    def __init__(self, layers: int) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(nn.Linear(16, 16) for _ in range(layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = torch.relu(block(x)) * 0.5 + x
        return x


def _files(root: Path) -> int:
    """model.pt2, model.json and model.compact under `root`; the program's node count."""
    ep = torch.export.export(_Stack(max(NODES // 5, 1)), (torch.randn(2, 16),)).run_decompositions()
    torch.export.save(ep, root / "model.pt2")
    archive = opwire.serde.pt2.read(root / "model.pt2")
    (root / "model.json").write_bytes(opwire.dumps(archive.program))
    (root / "model.compact").write_bytes(opwire.dumps(archive, format="compact"))
    return len(archive.program.graph_module.graph.nodes)


def _cpu() -> float:
    """CPU seconds (user + system) of this process's finished children so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _best(argv: list[str], cwd: Path, repeat: int = REPEAT) -> tuple[float, float]:
    """Fastest of `repeat` wall times of `argv` run from scratch (it must succeed), and the least CPU time of a run.

    The CPU time moves less than the wall time when other work shares the machine."""
    wall = cpu = float("inf")
    for _ in range(repeat):
        cpu_before, start = _cpu(), time.perf_counter()
        subprocess.run(argv, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall, cpu = min(wall, time.perf_counter() - start), min(cpu, _cpu() - cpu_before)
    return wall, cpu


def _loads_torch(args: list[str], cwd: Path) -> bool:
    """Whether `opwire ARGS` leaves torch in sys.modules."""
    done = subprocess.run([sys.executable, "-c", _PROBE, *args], cwd=cwd, capture_output=True, text=True)
    return done.stderr.rstrip().endswith("torch-loaded=1")


_JOB = "import torch\n\ntorch.ones(4).add(1)\n"
_DIST_JOB = (
    "import torch\nimport torch.distributed as dist\n\n"
    "dist.init_process_group('gloo')\nx = torch.ones(4)\ndist.all_reduce(x)\ndist.destroy_process_group()\n"
)


def _torchrun(*args: object) -> list[str]:
    """`torchrun --standalone --nproc-per-node 1 ARGS` as an argv."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "1", *map(str, args)]


def _running(root: Path, torch_cpu: float) -> None:
    """Print the start-up of the commands that run torch against the same work without opwire."""
    (root / "job.py").write_text(_JOB)
    (root / "dist_job.py").write_text(_DIST_JOB)
    (root / "torch_only.py").write_text("import torch\n")
    record = _torchrun("-m", "opwire", "record", "--out", "run", "--", "python", "dist_job.py")
    subprocess.run(record, cwd=root, check=True, capture_output=True)
    rows = {
        "python job.py": ([sys.executable, "job.py"], REPEAT),
        "record --out T -- python job.py": (
            [sys.executable, "-m", "opwire", "record", "--out", "job.trace", "--", "python", "job.py"],
            REPEAT,
        ),
        "torchrun: rank importing torch": (_torchrun("torch_only.py"), LAUNCHES),
        "torchrun: replay RUN --collectives": (_torchrun("-m", "opwire", "replay", "run", "--collectives"), LAUNCHES),
    }
    print(f"  {'running torch':<36} {'wall':>7} {'CPU':>7} {'x torch':>8} {'CPU - baseline':>15}")
    baseline = 0.0
    for k, (label, (argv, repeat)) in enumerate(rows.items()):
        t, cpu = _best(argv, root, repeat)
        if k % 2 == 0:
            baseline, extra = cpu, ""
        else:
            extra = f"{cpu - baseline:+14.3f}s"
        print(f"  {label:<36} {t:6.3f}s {cpu:6.3f}s {cpu / torch_cpu:7.2f}x {extra:>15}")


def main() -> None:
    """Measure the baselines and every command in this run; print each with its ratios."""
    with tempfile.TemporaryDirectory(prefix="opwire-bench-cli-") as tmp:
        root = Path(tmp)
        nodes = _files(root)
        size = (root / "model.pt2").stat().st_size
        print(f"program: {nodes} nodes; model.pt2 {size / 1e6:.1f} MB; best of {REPEAT} fresh starts each")
        bare, bare_cpu = _best([sys.executable, "-c", "pass"], root)
        with_torch, torch_cpu = _best([sys.executable, "-c", "import torch"], root)
        print(f"  baseline python -c pass:           {bare:6.3f} s wall, {bare_cpu:6.3f} s CPU")
        print(
            f"  baseline python -c 'import torch': {with_torch:6.3f} s wall, {torch_cpu:6.3f} s CPU "
            f"= {with_torch / bare:.1f}x pass"
        )
        commands = {
            "--help": ["--help"],
            "--version": ["--version"],
            "inspect --help": ["inspect", "--help"],
            "run --help": ["run", "--help"],
            "inspect model.json": ["inspect", "model.json"],
            "inspect model.pt2": ["inspect", "model.pt2"],
            "inspect model.compact": ["inspect", "model.compact"],
            "convert model.pt2 out.compact": ["convert", "model.pt2", "out.compact"],
            "convert model.compact out.json": ["convert", "model.compact", "out.json"],
            "schema diff IDL IDL": ["schema", "diff", _IDL, _IDL],
        }
        goals = {"--help": 0.25, "--version": 0.25, "inspect model.pt2": 0.5}
        print(f"  {'command':<32} {'wall':>7} {'x pass':>7} {'x torch':>8} {'CPU':>7} {'x torch':>8}  torch  goal")
        for label, args in commands.items():
            t, cpu = _best([sys.executable, "-m", "opwire", *args], root)
            for out in root.glob("out.*"):
                out.unlink()
            loaded = "LOADED" if _loads_torch(args, root) else "no"
            goal = goals.get(label)
            verdict = "" if goal is None else f"<= {goal} s {'met' if t <= goal else 'MISSED'}"
            print(
                f"  {label:<32} {t:6.3f}s {t / bare:6.1f}x {t / with_torch:7.2f}x {cpu:6.3f}s {cpu / torch_cpu:7.2f}x  "
                f"{loaded:<6} {verdict}"
            )
        _running(root, torch_cpu)


if __name__ == "__main__":
    main()
