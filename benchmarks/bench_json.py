"""opwire's typed JSON codec against torch's JSON path and bare json, on the test corpus.

Per program and in total, in one process: typed decode (bytes -> models) and encode (models -> bytes)
of opwire vs torch's `_bytes_to_dataclass` / `_to_json_bytes` as shipped and vs bare
`json.loads` / `json.dumps`; once as shipped (the garbage collector running, opwire pausing it itself)
and once with the collector disabled on both sides. Targets: decode >= 20x torch and within 5x of
json.loads; encode >= 2x torch, byte-identical.

    python benchmarks/bench_json.py [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import corpus
import torch
from _timing import best_of
from torch._export.serde import schema as torch_schema
from torch._export.serde.serialize import _bytes_to_dataclass, _to_json_bytes, serialize

import opwire
from opwire.schema import models as m

COLUMNS = ("ours_dec", "torch_dec", "json_loads", "ours_enc", "torch_enc", "json_dumps")


def _deep_mlp() -> tuple[str, bytes]:
    """A large synthetic program (~4.8k nodes) so totals are not dominated by fixed costs."""

    class Deep(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layers = torch.nn.ModuleList(torch.nn.Linear(8, 8) for _ in range(800))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            for layer in self.layers:
                x = torch.relu(layer(x)) * 0.5 + 1
            return x

    ep = torch.export.export(Deep(), (torch.randn(3, 8),))
    return "deep_mlp_800/training", serialize(ep).exported_program


def measure(name: str, data: bytes, repeat: int, gc_on: bool) -> dict[str, float]:
    """Times of every column for one program."""
    program = opwire.loads(data, m.ExportedProgram)
    if opwire.dumps(program) != data:
        raise SystemExit(f"{name}: opwire's JSON is not byte-identical to torch's")
    theirs = _bytes_to_dataclass(torch_schema.ExportedProgram, data)
    plain = json.loads(data)
    return {
        "ours_dec": best_of(lambda: opwire.loads(data, m.ExportedProgram), repeat, gc_on=gc_on),
        "torch_dec": best_of(lambda: _bytes_to_dataclass(torch_schema.ExportedProgram, data), repeat, gc_on=gc_on),
        "json_loads": best_of(lambda: json.loads(data), repeat, gc_on=gc_on),
        "ours_enc": best_of(lambda: opwire.dumps(program), repeat, gc_on=gc_on),
        "torch_enc": best_of(lambda: _to_json_bytes(theirs), repeat, gc_on=gc_on),
        "json_dumps": best_of(lambda: json.dumps(plain), repeat, gc_on=gc_on),
    }


def _line(name: str, size: int, t: dict[str, float]) -> str:
    return (
        f"{name:<34} {size / 1e3:>8.1f}kB  dec {t['ours_dec'] * 1e3:8.2f}ms "
        f"torch x{t['torch_dec'] / t['ours_dec']:6.1f} "
        f"loads x{t['ours_dec'] / t['json_loads']:4.2f} | enc {t['ours_enc'] * 1e3:7.2f}ms "
        f"torch x{t['torch_enc'] / t['ours_enc']:5.2f} dumps x{t['ours_enc'] / t['json_dumps']:4.2f}"
    )


def main() -> int:
    """Run the benchmark and print one line per program plus totals."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    items = [(p.name, p.json_bytes) for p in corpus.programs()] + [_deep_mlp()]
    for gc_on in (True, False):
        print(f"\n== garbage collector {'running (as shipped)' if gc_on else 'disabled on both sides'}")
        print("ratios: torch xN = torch's time / opwire's; loads/dumps xN = opwire's time / bare json's")
        totals = dict.fromkeys(COLUMNS, 0.0)
        size = 0
        for name, data in items:
            t = measure(name, data, args.repeat, gc_on)
            for k in COLUMNS:
                totals[k] += t[k]
            size += len(data)
            print(_line(name, len(data), t))
        print(_line("TOTAL", size, totals))
        dec_ok = totals["torch_dec"] / totals["ours_dec"] >= 20 and totals["ours_dec"] / totals["json_loads"] <= 5
        enc_ok = totals["torch_enc"] / totals["ours_enc"] >= 2
        print(f"targets: decode {'met' if dec_ok else 'MISSED'}, encode {'met' if enc_ok else 'MISSED'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
