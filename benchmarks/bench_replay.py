"""Recording, replay and the graph runner against plain eager torch, measured in one process.

Targets (issue 6): on ops over 256x256 tensors, recording takes at most 5x the time of the same
eager code (`record` = the `with opwire.record()` block, payloads included); isolated replay with
comparison reaches at least 1/3 of the throughput of calling the same ops directly; `run_program`
on a transformer layer stays within 1.5x of `ep.module()(*inputs)`.

    python benchmarks/bench_replay.py [--repeat N] [--steps S]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch
from _timing import best_of

import opwire
from opwire.proxy_executor.graph import ProgramRunner
from opwire.serde import torch_bridge


def _workload(a: torch.Tensor, b: torch.Tensor, steps: int) -> torch.Tensor:
    """A mix of matmul, elementwise, reductions and an in-place update over 256x256 tensors."""
    acc = torch.zeros_like(a)
    for _ in range(steps):
        h = torch.mm(a, b).relu()
        h = h * 0.5 + a
        s = h.softmax(dim=-1)
        acc.add_(s, alpha=0.1)
        _ = h.sum(dim=0)
    return acc


def _direct_calls(trace: opwire.Trace) -> Callable[[], None]:
    """The recorded calls as plain torch.ops calls on prebuilt inputs (the throughput baseline)."""
    calls = []
    for rec in trace.records:
        ns, _, rest = rec.target.partition("::")
        name, _, overload = rest.partition(".")
        op = getattr(getattr(getattr(torch.ops, ns), name), overload)
        kwargs = {}
        for na in rec.inputs:
            arg = na.arg
            if arg.type == "as_tensor":
                kwargs[na.name] = opwire.serde.tensors.to_tensor(trace.tensors[arg.value.name])
            else:
                kwargs[na.name] = (
                    opwire.serde.objects.to_python(opwire.schema.models.Value(**{arg.type: arg.value}))
                    if arg.type in opwire.schema.models.Value.model_fields
                    else None
                )
        calls.append((op, kwargs))

    def run() -> None:
        for op, kwargs in calls:
            op(**{k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in kwargs.items()})

    return run


def main() -> None:
    torch.set_num_threads(1)  # 2 shared cores: OpenMP spin-waits would swamp every figure; all sides single-threaded
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20)
    ns = parser.parse_args()
    torch.manual_seed(0)
    a, b = torch.randn(256, 256), torch.randn(256, 256)

    eager = best_of(lambda: _workload(a, b, ns.steps), ns.repeat)

    def recorded() -> None:
        with opwire.record():
            _workload(a, b, ns.steps)

    rec = best_of(recorded, ns.repeat)
    with opwire.record() as trace:
        _workload(a, b, ns.steps)
    n = len(trace)
    print(
        f"recording: {n} calls; eager {eager * 1e3:.1f} ms, recorded {rec * 1e3:.1f} ms -> "
        f"ratio {rec / eager:.2f}x (target <= 5x)"
    )

    direct = best_of(_direct_calls(trace), ns.repeat)
    replayed = best_of(lambda: opwire.replay(trace, progress=False), ns.repeat)
    report = opwire.replay(trace, progress=False)
    assert report.ok, str(report)
    print(
        f"isolated replay with comparison: {n / replayed:.0f} calls/s vs direct {n / direct:.0f} calls/s -> "
        f"replay/direct throughput {direct / replayed:.2f} (target >= 0.33)"
    )

    layer = torch.nn.TransformerEncoderLayer(
        d_model=256, nhead=8, dim_feedforward=1024, dropout=0.0, batch_first=True
    ).eval()
    x = torch.randn(4, 64, 256)
    ep = torch.export.export(layer, (x,))
    module = ep.module()
    archive = torch_bridge.archive_from_exported_program(ep)
    runner = ProgramRunner(archive)
    with torch.no_grad():
        torch.testing.assert_close(runner(x), module(x))
        t_module = best_of(lambda: module(x), ns.repeat * 4)
        t_runner = best_of(lambda: runner(x), ns.repeat * 4)
        t_run_program = best_of(lambda: opwire.run_program(archive, (x,)), ns.repeat * 4)
    print(
        f"transformer layer: ep.module() {t_module * 1e3:.2f} ms, ProgramRunner {t_runner * 1e3:.2f} ms "
        f"({t_runner / t_module:.2f}x), run_program {t_run_program * 1e3:.2f} ms "
        f"({t_run_program / t_module:.2f}x; target <= 1.5x)"
    )


if __name__ == "__main__":
    main()
