"""What isolation costs (issue 24): a one-shot isolated run, and the persistent isolated runner's per-call overhead.

Two figures, each against its in-process baseline measured in the same run (median of `--repeat`):
- one-shot: `ProgramRunner(program, isolate=True).run_fresh(x)` (fork, confinement, Landlock, the seccomp allowlist
  on every thread, one call, the child ends) beyond `ProgramRunner(program).run_fresh(x)`. Goal: <= +0.15 s.
- persistent: a call of `ProgramRunner(program, isolate=True)` whose child is already running, on a 1 MB input
  with a 1 MB output (memfd both ways, checked layout), beyond the same call in-process. Goal: <= 1 ms.

    python benchmarks/bench_isolate.py [--repeat N] [--calls N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable

import torch

from opwire.proxy_executor import ProgramRunner
from opwire.serde import torch_bridge

ONE_SHOT_GOAL = 0.15  # seconds beyond in-process
PER_CALL_GOAL = 1e-3  # seconds beyond in-process, 1 MB in and out


class _Small(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(16, 32)
        self.b = torch.nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(self.a(x).relu()).softmax(-1)


class _Scale(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2 + 1


def _median(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _one_shot(archive: object, x: torch.Tensor, isolate: bool) -> None:
    runner = ProgramRunner(archive, isolate=isolate)  # type: ignore[arg-type]
    try:
        runner.run_fresh((x,))
    finally:
        runner.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9, help="one-shot runs per side (median)")
    parser.add_argument("--calls", type=int, default=300, help="persistent calls per side (median)")
    args = parser.parse_args()
    torch.set_num_threads(1)  # the API's isolated child runs on one intra-op thread: the baseline does too
    small = torch_bridge.archive_from_exported_program(torch.export.export(_Small(), (torch.randn(2, 16),)))
    x = torch.randn(2, 16)
    _one_shot(small, x, True)  # warm both paths (lazy imports, allocator)
    _one_shot(small, x, False)
    base = _median(lambda: _one_shot(small, x, False), args.repeat)
    iso = _median(lambda: _one_shot(small, x, True), args.repeat)

    big = torch.randn(512, 512)  # 1 MiB of float32 in, 1 MiB out
    scale = torch_bridge.archive_from_exported_program(torch.export.export(_Scale(), (big,)))
    inside, outside = ProgramRunner(scale, isolate=True), ProgramRunner(scale)
    try:
        if not torch.equal(inside(big), outside(big)):
            print("the persistent runner's output differs from in-process", file=sys.stderr)
            return 1
        call_base = _median(lambda: outside(big), args.calls)
        call_iso = _median(lambda: inside(big), args.calls)
    finally:
        inside.close()

    one_shot, per_call = iso - base, call_iso - call_base
    print(f"one-shot run, in-process           {base * 1e3:9.2f} ms")
    print(f"one-shot run, isolated             {iso * 1e3:9.2f} ms  (x{iso / base:.1f}; +{one_shot * 1e3:.1f} ms)")
    print(f"persistent call 1 MB, in-process   {call_base * 1e3:9.3f} ms")
    print(f"persistent call 1 MB, isolated     {call_iso * 1e3:9.3f} ms  (x{call_iso / call_base:.1f}; "
          f"+{per_call * 1e3:.3f} ms)")  # fmt: skip
    ok_one, ok_call = one_shot <= ONE_SHOT_GOAL, per_call <= PER_CALL_GOAL
    print(f"goal: one-shot <= +{ONE_SHOT_GOAL * 1e3:g} ms: {'met' if ok_one else 'MISSED'}; "
          f"per call <= +{PER_CALL_GOAL * 1e3:g} ms: {'met' if ok_call else 'MISSED'}")  # fmt: skip
    return 0 if ok_one and ok_call else 1


if __name__ == "__main__":
    sys.exit(main())
