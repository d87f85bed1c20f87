"""Model-scale loading: first-output time and peak RSS growth, each in a fresh child process, page cache warm.

The model is a 16-layer `nn.TransformerEncoder` at d=1024 (about 800 MB of float32 weights; set
OPWIRE_BENCH_LOAD_LAYERS / OPWIRE_BENCH_LOAD_D to change it), saved with `torch.export.save` and converted
to `.opw`. Each path runs in its own child, after its imports, from its file to its first output:

- torch: `torch.export.load(p).module()(x)` (the baseline, 1x);
- opwire .pt2: `opwire.run_program(opwire.serde.pt2.open(p), (x,))`;
- opwire .opw: `opwire.run_program(opwire.serde.opw.open(p), (x,))`;
- opwire compact / binary: the whole `OpwireArchive` as one Thrift blob (`opwire convert --to compact`),
  `opwire.run_program(opwire.open(p), (x,))` (issue 27: its payloads mapped, not read);
- safetensors: `safetensors.torch.load_file` of the same weights (no output: weights only);
- read floor: reading the .pt2's bytes into memory (what any copying loader pays at least).

Each child runs torch single-threaded (`torch.set_num_threads(1)`): on a shared, loaded machine OpenMP's
spin barriers otherwise make every forward pass several times slower and the figures mostly noise.
Each child also reports its CPU time (user + system, `time.process_time`), the steadier ratio on a loaded machine.
Peak RSS growth is the child's peak resident set (VmHWM, reset after imports through
/proc/self/clear_refs) minus its resident set before loading; mapped pages the run touches count.
Goals (issue 17): first output at least 5x faster than torch, and peak RSS growth at most 1.1x the weights'
bytes, for the .pt2 and the .opw, and (issue 27) for the Thrift archives. Run it once: it writes about 4 GB
to a temporary directory (OPWIRE_BENCH_LOAD_LAYERS=4: about 1 GB).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LAYERS = int(os.environ.get("OPWIRE_BENCH_LOAD_LAYERS", "16"))
D = int(os.environ.get("OPWIRE_BENCH_LOAD_D", "1024"))
PATHS = ("torch", "opwire .pt2", "opwire .opw", "opwire compact", "opwire binary", "safetensors", "read floor")
OPWIRE_PATHS = ("opwire .pt2", "opwire .opw", "opwire compact", "opwire binary")


def _status(key: str) -> int:
    """A VmRSS/VmHWM figure of this process, in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {key} in /proc/self/status")


def child(mode: str, tmp: Path) -> None:
    """Measure one path in this (fresh) process and print its figures as JSON."""
    import torch
    import torch.export

    import opwire
    import opwire.proxy_executor  # each path's modules are imported before it is timed
    from opwire.serde import opw, pt2

    x = torch.load(tmp / "x.pt")
    if mode == "safetensors":
        from safetensors.torch import load_file
    torch.set_grad_enabled(False)
    torch.set_num_threads(1)
    Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS
    before = _status("VmRSS")
    start, cpu = time.perf_counter(), time.process_time()
    if mode == "torch":
        out = torch.export.load(tmp / "model.pt2").module()(x)
    elif mode == "opwire .pt2":
        out = opwire.run_program(pt2.open(tmp / "model.pt2"), (x,))
    elif mode == "opwire .opw":
        out = opwire.run_program(opw.open(tmp / "model.opw"), (x,))
    elif mode in ("opwire compact", "opwire binary"):
        out = opwire.run_program(opwire.open(tmp / f"model.{mode.split()[1]}"), (x,))
    elif mode == "safetensors":
        out = load_file(tmp / "model.safetensors")
    else:
        with open(tmp / "model.pt2", "rb") as f:
            out = f.read()
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    check = float(out.float().sum()) if isinstance(out, torch.Tensor) else 0.0
    print(json.dumps({"s": elapsed, "cpu": cpu, "rss": _status("VmHWM") - before, "sum": check}))


def _measure(mode: str, tmp: Path) -> dict[str, float]:
    cmd = [sys.executable, __file__, "--child", mode, str(tmp)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False)
    if done.returncode:
        raise RuntimeError(f"{mode}: child failed: {done.stderr.strip()[-2000:]}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _build(tmp: Path) -> int:
    """Export the encoder, save .pt2, .opw and .safetensors; returns the weights' bytes."""
    import torch
    from safetensors.torch import save_file

    import opwire
    from opwire.serde import opw, pt2

    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(D, nhead=16, dim_feedforward=4 * D, batch_first=True, dropout=0.0)
    model = torch.nn.TransformerEncoder(layer, LAYERS, enable_nested_tensor=False).eval()
    with torch.no_grad():  # the encoder clones one layer: give every weight its own values (no dedup to win)
        for param in model.parameters():
            param.normal_(0.0, 0.02)
    x = torch.randn(1, 16, D)
    torch.save(x, tmp / "x.pt")
    with torch.no_grad():
        ep = torch.export.export(model, (x,))
    torch.export.save(ep, tmp / "model.pt2")
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    save_file(state, tmp / "model.safetensors")
    with pt2.open(tmp / "model.pt2") as archive:
        opw.write(archive, tmp / "model.opw")
    whole = pt2.read(tmp / "model.pt2")
    for codec in ("compact", "binary"):
        (tmp / f"model.{codec}").write_bytes(opwire.dumps(whole, codec))
    del whole
    return sum(v.numel() * v.element_size() for v in state.values())


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="opwire-bench-load-") as name:
        tmp = Path(name)
        start = time.perf_counter()
        weights = _build(tmp)
        sizes = {s: (tmp / f"model{s}").stat().st_size for s in (".pt2", ".opw", ".compact", ".safetensors")}
        print(
            f"model: TransformerEncoder {LAYERS} layers d={D}, weights {weights / 1e6:.0f} MB; "
            + ", ".join(f"{k} {v / 1e6:.0f} MB" for k, v in sizes.items())
            + f" (built in {time.perf_counter() - start:.0f} s)"
        )
        _measure("read floor", tmp)  # warm the page cache for every file
        for f in ("model.opw", "model.compact", "model.binary", "model.safetensors"):
            (tmp / f).read_bytes()
        results = {mode: _measure(mode, tmp) for mode in PATHS}
        base, base_cpu = results["torch"]["s"], results["torch"]["cpu"]
        ref = results["torch"]["sum"]
        print(
            f"{'path':<14} {'first output':>12} {'vs torch':>9} {'CPU time':>10} {'vs torch':>9} "
            f"{'peak RSS growth':>16} {'x weights':>10}"
        )
        for mode, r in results.items():
            print(
                f"{mode:<14} {r['s'] * 1000:>10.0f} ms {base / r['s']:>8.1f}x {r['cpu'] * 1000:>7.0f} ms "
                f"{base_cpu / max(r['cpu'], 1e-9):>8.1f}x {r['rss'] / 1e6:>13.0f} MB {r['rss'] / weights:>9.2f}x"
            )
        for mode in OPWIRE_PATHS:
            r = results[mode]
            speed, mem, cpu = base / r["s"], r["rss"] / weights, base_cpu / r["cpu"]
            same = abs(r["sum"] - ref) <= 1e-3 * max(1.0, abs(ref))
            print(
                f"{mode}: {speed:.1f}x torch (goal >= 5x: {'ok' if speed >= 5 else 'MISSED'}; CPU time {cpu:.1f}x), "
                f"RSS {mem:.2f}x weights (goal <= 1.1x: {'ok' if mem <= 1.1 else 'MISSED'}), "
                f"output {'matches' if same else 'DIFFERS from'} torch's"
            )


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        child(sys.argv[2], Path(sys.argv[3]))
    else:
        main()
