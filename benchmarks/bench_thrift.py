"""opwire's Thrift binary and compact codecs against opwire's JSON and torch's JSON path, on the test corpus.

Per program and in total, in one process: typed decode (bytes -> validated models) and encode (models ->
bytes) of binary and compact, opwire's JSON, and torch's `_bytes_to_dataclass` / `_to_json_bytes`; and
the sizes. Targets: compact at most 0.65x torch's JSON bytes; binary and compact decode at most 0.7x opwire's
typed JSON decode (issue 27). No decoder pauses the garbage collector: the largest program's first binary
decode in fresh processes is printed as shipped, with no full collection due, and with the collector disabled
around it. `--largest-only` measures the largest (synthetic, 3.3 MB of JSON) program alone: minutes instead of
the corpus's 10-20.

    python benchmarks/bench_thrift.py [--repeat N] [--largest-only]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import best_of
from bench_json import _deep_mlp, first_decode_line
from support import corpus
from torch._export.serde import schema as torch_schema
from torch._export.serde.serialize import _bytes_to_dataclass, _to_json_bytes

import opwire
from opwire.schema import models as m
from opwire.serde import FORMATS


def measure(name: str, data: bytes, repeat: int, clock: Callable[[], float] = time.thread_time) -> dict[str, float]:
    """Seconds (dec_*/enc_*) and bytes (size_*) for one program; checks every codec round-trips exactly."""
    program = opwire.loads(data, m.ExportedProgram)
    theirs = _bytes_to_dataclass(torch_schema.ExportedProgram, data)
    out: dict[str, float] = {
        "dec_torch": best_of(
            lambda: _bytes_to_dataclass(torch_schema.ExportedProgram, data), repeat, collect_first=True, clock=clock
        ),
        "enc_torch": best_of(lambda: _to_json_bytes(theirs), repeat, collect_first=True, clock=clock),
        "size_torch": len(data),
    }
    for fmt in FORMATS:
        raw = opwire.dumps(program, fmt)  # type: ignore[arg-type]
        if opwire.dumps(opwire.loads(raw, m.ExportedProgram, fmt), "json") != data:  # type: ignore[arg-type]
            raise SystemExit(f"{name}: {fmt} does not round-trip to torch's JSON bytes")
        out[f"dec_{fmt}"] = best_of(
            lambda raw=raw, fmt=fmt: opwire.loads(raw, m.ExportedProgram, fmt), repeat, collect_first=True, clock=clock
        )
        out[f"enc_{fmt}"] = best_of(lambda fmt=fmt: opwire.dumps(program, fmt), repeat, collect_first=True, clock=clock)
        out[f"size_{fmt}"] = len(raw)
    return out


def _line(name: str, t: dict[str, float]) -> str:
    parts = [f"{name:<30} torch json {t['size_torch'] / 1e3:8.1f}kB"]
    for fmt in ("binary", "compact"):
        parts.append(
            f"{fmt} {t[f'size_{fmt}'] / t['size_torch']:4.2f}x size, dec {t[f'dec_{fmt}'] * 1e3:7.2f}ms "
            f"({t[f'dec_{fmt}'] / t['dec_json']:4.2f}x json, torch x{t['dec_torch'] / t[f'dec_{fmt}']:5.1f}), "
            f"enc {t[f'enc_{fmt}'] * 1e3:6.2f}ms ({t[f'enc_{fmt}'] / t['enc_json']:4.2f}x json)"
        )
    return " | ".join(parts)


def main() -> int:
    """Run the benchmark; print one line per program, totals, and whether the targets are met."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--wall", action="store_true", help="time by the wall clock instead of this thread's CPU")
    parser.add_argument("--largest-only", action="store_true", help="the largest program only, not the corpus")
    args = parser.parse_args()
    clock = time.perf_counter if args.wall else time.thread_time
    print(f"clock: {'wall' if args.wall else 'CPU time of this thread (--wall for the wall clock)'}")
    corpus_items = [] if args.largest_only else [(p.name, p.json_bytes) for p in corpus.programs()]
    items = [*corpus_items, _deep_mlp()]
    print("ratios: Nx size = bytes / torch's JSON bytes; Nx json = time / opwire's typed JSON; torch xN = torch / ours")
    totals: dict[str, float] = {}
    for name, data in items:
        t = measure(name, data, args.repeat, clock)
        for k, v in t.items():
            totals[k] = totals.get(k, 0.0) + v
        print(_line(name, t))
    print(_line("TOTAL", totals))
    print(
        f"TOTAL ms: json dec {totals['dec_json'] * 1e3:.1f} enc {totals['enc_json'] * 1e3:.1f}; "
        f"torch dec {totals['dec_torch'] * 1e3:.1f} enc {totals['enc_torch'] * 1e3:.1f}"
    )
    print(first_decode_line(opwire.dumps(opwire.loads(items[-1][1], m.ExportedProgram), "binary"), "binary", 3))
    size_ok = totals["size_compact"] / totals["size_torch"] <= 0.65
    worst = max(totals["dec_binary"], totals["dec_compact"]) / totals["dec_json"]
    print(
        f"targets: compact size {'met' if size_ok else 'MISSED'}, decode <= 0.7x JSON "
        f"{'met' if worst <= 0.7 else 'MISSED'} (binary {totals['dec_binary'] / totals['dec_json']:.2f}x, "
        f"compact {totals['dec_compact'] / totals['dec_json']:.2f}x)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
