"""`opwire` start-up: each command that executes nothing, in fresh child processes, against two baselines.

Every figure is the best of OPWIRE_BENCH_CLI_REPEAT (default 7) wall times of `python -m opwire ARGS` started
from scratch (and the least CPU time of those runs, which a busy machine inflates less), measured in this run
beside the two baselines: `python -c pass` (the interpreter alone) and
`python -c "import torch"` (what every command paid before the CLI imported only what it runs). The program is
an MLP stack decomposed to core ATen with OPWIRE_BENCH_CLI_NODES (default ~2,000) nodes, saved by
`torch.export.save`. Each command is also run once more to check that torch stays unloaded.

Goals (issue 27): `--help` and `--version` within 0.25 s, `inspect model.pt2` (reads no weight) within 0.5 s at
2,000 nodes, and no command here imports torch.
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


def _best(argv: list[str], cwd: Path) -> tuple[float, float]:
    """Fastest of REPEAT wall times of `argv` run from scratch (it must succeed), and the least CPU time of a run.

    The CPU time moves less than the wall time when other work shares the machine."""
    wall = cpu = float("inf")
    for _ in range(REPEAT):
        cpu_before, start = _cpu(), time.perf_counter()
        subprocess.run(argv, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall, cpu = min(wall, time.perf_counter() - start), min(cpu, _cpu() - cpu_before)
    return wall, cpu


def _loads_torch(args: list[str], cwd: Path) -> bool:
    """Whether `opwire ARGS` leaves torch in sys.modules."""
    done = subprocess.run([sys.executable, "-c", _PROBE, *args], cwd=cwd, capture_output=True, text=True)
    return done.stderr.rstrip().endswith("torch-loaded=1")


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


if __name__ == "__main__":
    main()
