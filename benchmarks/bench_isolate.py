"""Start-up cost of an isolated `opwire run` (issue 16): a small program, each command a fresh process.

Three commands, timed as a user runs them (wall time of the whole process, best of `--repeat`):
`python -c 'import torch'` (the floor every command pays), `opwire run --no-isolate` and `opwire run`
(forked sandboxed child: rlimits, seccomp). Target: the isolated run costs under 1 s beyond torch's
import. The in-process figure of forking alone (`run_in_child` of an empty work) is printed beside it.

    python benchmarks/bench_isolate.py [--repeat N]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

import opwire
from opwire.schema import models as m
from opwire.serde import torch_bridge
from opwire.serde.tensors import from_tensor

TARGET = 1.0  # seconds beyond `import torch`


class _Small(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(16, 32)
        self.b = torch.nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(self.a(x).relu()).softmax(-1)


def _wall(argv: list[str], cwd: Path, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(argv, cwd=cwd, check=True, capture_output=True, timeout=300)
        best = min(best, time.perf_counter() - start)
    return best


def _fork_only(repeat: int) -> float:
    from opwire.proxy_executor.isolate import run_in_child
    from opwire.proxy_executor.sandbox import Limits

    def work(child: object) -> dict[str, bytes]:
        child.ready()  # type: ignore[attr-defined]
        return {}

    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        run_in_child(work, Limits(max_memory=1 << 30)).result()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        archive = torch_bridge.archive_from_exported_program(torch.export.export(_Small(), (torch.randn(2, 16),)))
        (d / "small.opw").write_bytes(opwire.dumps(archive, "compact"))
        values = m.Values(values={"x": m.Value(as_tensor=from_tensor(torch.randn(2, 16)))})
        (d / "in.json").write_bytes(opwire.dumps(values))
        run = [sys.executable, "-m", "opwire.cli", "run", "small.opw", "--inputs", "in.json"]
        torch_only = _wall([sys.executable, "-c", "import torch"], d, args.repeat)
        in_process = _wall([*run, "--no-isolate"], d, args.repeat)
        isolated = _wall(run, d, args.repeat)
    fork = _fork_only(max(args.repeat, 5))
    beyond = isolated - torch_only
    print(f"python -c 'import torch'      {torch_only:7.3f} s")
    print(f"opwire run --no-isolate       {in_process:7.3f} s  (+{in_process - torch_only:.3f} s beyond torch)")
    print(f"opwire run (isolated)         {isolated:7.3f} s  (+{beyond:.3f} s beyond torch)")
    print(f"isolation alone               {isolated - in_process:+7.3f} s  (fork + sandbox in-process: {fork:.3f} s)")
    ok = beyond < TARGET
    print(f"target: isolated run < {TARGET:g} s beyond torch's import: {'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
