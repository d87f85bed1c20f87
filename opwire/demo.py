"""`make demo`: export two built-in models, put them on the wire with opwire, bring them back to life.

For each model: torch.export -> torch's JSON -> opwire models -> opwire's JSON (byte-identical to
torch's) -> compact Thrift and back -> torch's deserializer -> run, matching eager.
"""

import functools
import gc
import time
from collections.abc import Callable
from typing import Any

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
    """Run the demo and print a table; exit 0 when every check passes."""
    import torch
    from torch._export.serde import schema as torch_schema
    from torch._export.serde.serialize import SerializedArtifact, _bytes_to_dataclass, deserialize, serialize

    import opwire
    from opwire.schema import models as m

    print("opwire demo: torch.export -> opwire -> bytes -> opwire -> torch, on two built-in models\n")
    header = f"{'program':<10} {'nodes':>5} {'json bytes':>10} {'compact':>8} {'identical':>9} {'runs':>5} "
    header += f"{'opwire decode':>13} {'torch decode':>12} {'speedup':>7}"
    print(header)
    print("-" * len(header))
    ok = True
    for name, module, args in _models():
        ep = torch.export.export(module, args)
        artifact = serialize(ep)
        torch_json = artifact.exported_program
        program = opwire.loads(torch_json, m.ExportedProgram)
        ours = opwire.dumps(program)
        identical = ours == torch_json
        compact = _try_compact(program)
        restored = deserialize(
            SerializedArtifact(ours, artifact.state_dict, artifact.constants, artifact.example_inputs)
        )
        runs = bool(torch.allclose(restored.module()(*args), module(*args), atol=1e-5))
        gc.disable()
        try:
            t_ours = _best(functools.partial(opwire.loads, torch_json, m.ExportedProgram))
            t_torch = _best(functools.partial(_bytes_to_dataclass, torch_schema.ExportedProgram, torch_json))
        finally:
            gc.enable()
        nodes = len(program.graph_module.graph.nodes)
        size = f"{len(compact)}" if compact is not None else "-"
        print(
            f"{name:<10} {nodes:>5} {len(ours):>10} {size:>8} {'yes' if identical else 'NO':>9} "
            f"{'yes' if runs else 'NO':>5} {t_ours * 1e3:>10.2f} ms {t_torch * 1e3:>9.2f} ms {t_torch / t_ours:>6.1f}x"
        )
        ok = ok and identical and runs
    print("\nidentical: opwire's JSON is byte-for-byte torch's; runs: torch's deserializer ran it and matched eager")
    return 0 if ok else 1


def _try_compact(program: Any) -> bytes | None:
    """Compact Thrift bytes of the program (round-tripped), or None if the codec is not available."""
    import opwire

    try:
        data = opwire.dumps(program, format="compact")
    except ImportError:
        return None
    back = opwire.loads(data, type(program), format="compact")
    if opwire.dumps(back) != opwire.dumps(program):
        raise SystemExit("compact round trip changed the program")
    return data


if __name__ == "__main__":
    raise SystemExit(main())
