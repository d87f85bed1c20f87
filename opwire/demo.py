"""`make demo`: export two built-in models, put them on the wire with opwire, bring them back to life.

For each model: torch.export -> torch's JSON -> opwire models -> opwire's JSON (byte-identical to
torch's) -> compact Thrift and back -> torch's deserializer -> run, matching eager.
"""

import functools
import gc
import time
from collections.abc import Callable
from typing import Any

import opwire
from opwire.proxy_executor import DefaultPolicy

__all__ = ["main"]


def _define_custom_op() -> Any:
    """A torch.library custom op with defaults of several types (defined once per process)."""
    import torch

    if hasattr(torch.ops, "opwire_demo") and hasattr(torch.ops.opwire_demo, "scaled_shift"):
        return torch.ops.opwire_demo.scaled_shift

    @torch.library.custom_op("opwire_demo::scaled_shift", mutates_args=())
    def scaled_shift(
        x: torch.Tensor, scale: float = 2.0, shift: int = 1, clamp: bool = True, mode: str = "linear"
    ) -> torch.Tensor:
        y: torch.Tensor = x * scale + shift if mode == "linear" else torch.exp(x) * scale
        return y.clamp(-10.0, 10.0) if clamp else y

    @scaled_shift.register_fake
    def _(x: torch.Tensor, scale: float = 2.0, shift: int = 1, clamp: bool = True, mode: str = "linear") -> Any:
        return torch.empty_like(x)

    return torch.ops.opwire_demo.scaled_shift


def _models() -> list[tuple[str, Any, tuple[Any, ...]]]:
    import torch

    op = _define_custom_op()

    class ConvNet(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
            self.bn = torch.nn.BatchNorm2d(8)
            self.fc = torch.nn.Linear(8, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = torch.relu(self.bn(self.conv(x))).mean(dim=[2, 3])
            out: torch.Tensor = self.fc(h).clamp(min=float("-inf"), max=5.0)
            return out

    class WithCustomOp(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(6, 6)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            out: torch.Tensor = op(self.lin(x), shift=3) + op(x, mode="exp")
            return out

    torch.manual_seed(0)
    return [
        ("convnet", ConvNet().eval(), (torch.randn(2, 3, 8, 8),)),
        ("custom_op", WithCustomOp(), (torch.randn(4, 6),)),
    ]


def _best(fn: Callable[[], Any], repeat: int = 5) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> int:
    """Run the demo and print what it checked; exit 0 when every check passes."""
    import torch

    torch.manual_seed(0)
    print("opwire demo: two built-in models (a conv net, and a model calling a custom op with defaults)\n")
    ok = _wire_table()
    ok = _replay_section() and ok
    print("\nall checks passed" if ok else "\nSOME CHECKS FAILED")
    print(NEXT_STEPS)
    return 0 if ok else 1


NEXT_STEPS = """
what to try next, on your own files (model.pt2: torch.export.save of any exported program):
  opwire inspect model.pt2                          # signature, symbolic sizes, ops (weights never read)
  opwire convert model.pt2 model.opw                # a pickle-free archive whose weights load mapped
  opwire run model.opw --inputs in.json             # run it; in.json is {"x": [[1.0, 2.0]]}
  opwire view model.pt2                             # the program as a page (model.pt2.html)
  opwire record --out train.trace -- python train.py    # every dispatcher call of a script
  opwire replay train.trace                         # re-run and compare each call (--verbose: per op)
  opwire diff a.trace b.trace                       # two recordings call by call, first difference first
  opwire ops validate mylib --import ./mylib.py     # are your custom ops export- and replay-friendly?
docs: docs/tutorials/ (serialize-and-move, record-and-replay, validate-custom-ops, aoti-extern-nodes)"""
"""What `make demo` ends with: the commands that do on the user's own files what the demo showed."""


def _wire_table() -> bool:
    """torch.export -> opwire JSON/compact -> back to torch and to opwire's own graph runner."""
    import torch
    from torch._export.serde import schema as torch_schema
    from torch._export.serde.serialize import SerializedArtifact, _bytes_to_dataclass, deserialize, serialize

    from opwire.schema import models as m  # deferred: imports pydantic
    from opwire.serde.torch_bridge import archive_from_exported_program  # deferred: imports torch

    print("1. on the wire: torch JSON -> opwire -> JSON (same bytes?) and a pickle-free compact archive")
    header = f"{'program':<10} {'nodes':>5} {'json':>8} {'compact':>8} {'same bytes':>10} {'torch runs':>10} "
    header += f"{'opwire runs':>11} {'opwire decode':>13} {'torch decode':>12} {'speedup':>7}"
    print(header)
    print("-" * len(header))
    ok = True
    for name, module, args in _models():
        ep = torch.export.export(module, args)
        expected = module(*args)
        artifact = serialize(ep)
        torch_json = artifact.exported_program
        program = opwire.loads(torch_json, m.ExportedProgram)
        ours = opwire.dumps(program)
        restored = deserialize(
            SerializedArtifact(ours, artifact.state_dict, artifact.constants, artifact.example_inputs)
        )
        torch_runs = bool(torch.allclose(restored.module()(*args), expected, atol=1e-5))
        compact = opwire.dumps(archive_from_exported_program(ep), format="compact")
        archive = opwire.loads(compact, m.OpwireArchive, format="compact")
        ours_runs = bool(torch.allclose(opwire.run_program(archive, args), expected, atol=1e-5))
        gc.disable()
        try:
            t_ours = _best(functools.partial(opwire.loads, torch_json, m.ExportedProgram))
            t_torch = _best(functools.partial(_bytes_to_dataclass, torch_schema.ExportedProgram, torch_json))
        finally:
            gc.enable()
        nodes = len(program.graph_module.graph.nodes)
        yes = {True: "yes", False: "NO"}
        print(
            f"{name:<10} {nodes:>5} {len(ours):>8} {len(compact):>8} {yes[ours == torch_json]:>10} "
            f"{yes[torch_runs]:>10} {yes[ours_runs]:>11} {t_ours * 1e3:>10.2f} ms {t_torch * 1e3:>9.2f} ms "
            f"{t_torch / t_ours:>6.1f}x"
        )
        ok = ok and ours == torch_json and torch_runs and ours_runs
    print(
        "same bytes: opwire's JSON is byte-for-byte torch's; torch runs: torch's deserializer ran opwire's JSON "
        "and matched eager;\nopwire runs: opwire's own graph runner ran the compact archive (weights included) "
        "and matched eager"
    )
    return ok


def _replay_section() -> bool:
    """Record the custom-op model's calls, save them compact, replay under REQUIRE_SERIALIZED."""
    import tempfile
    from pathlib import Path

    print("\n2. record and replay: every dispatcher call of one forward pass, saved, read back and re-run")
    _, module, args = _models()[1]
    with opwire.record() as trace:
        module(*args)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "forward.trace"
        trace.save(path, format="compact")
        size = path.stat().st_size
        loaded = opwire.load_trace(path)
    ops = sorted({r.target for r in loaded.records})
    report = opwire.replay(loaded, policy=DefaultPolicy.REQUIRE_SERIALIZED, progress=False)
    print(f"recorded {len(loaded.records)} calls of {len(ops)} ops ({', '.join(ops)}) into {size} bytes")
    print(report)
    return bool(report.ok and report.replayed == len(loaded.records))


if __name__ == "__main__":
    raise SystemExit(main())
