"""`opwire view` at ~2,000, 10,000 and 20,000 nodes: render time, time to interactive in headless Chromium, page size.

Programs: `Stack(n)` (n transformer encoder layers, decomposed to core ATen) for n = 28, 137, 274. Exporting them
takes torch minutes (half an hour for the biggest on a busy machine), so each program's JSON is kept in
$OPWIRE_BENCH_CACHE (default ~/.cache/opwire/bench_view), named by layer count and torch version.
OPWIRE_BENCH_VIEW_LAYERS="28,137" picks the sizes.

Targets (issue 18): a 10,000-node program opens interactive within 3 s; render < 2 s at 2,000 nodes; the page
within a few times the program's JSON. The baseline measured in the same run is opwire's own decode of the
program JSON (what any reader of the file pays first); the render is reported as a ratio to it. Chromium is
Debian's `chromium`; without it the browser figures are skipped (and the script says so).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import torch
from _timing import best_of
from support import view_programs
from support.browser import CHROMIUM, Browser

from opwire.schema import models as m
from opwire.serde.json import decode
from opwire.view import render_html

_BOXES = "document.querySelectorAll('g.node').length"
_PAINTED = "new Promise(r => requestAnimationFrame(() => setTimeout(() => r(1), 0)))"  # after the next frame
LAYERS = [int(n) for n in os.environ.get("OPWIRE_BENCH_VIEW_LAYERS", "28,137,274").split(",")]
CACHE = Path(os.environ.get("OPWIRE_BENCH_CACHE", Path.home() / ".cache" / "opwire" / "bench_view"))


def program(layers: int) -> bytes:
    """torch's JSON of Stack(layers), decomposed (exported once, then read from the cache)."""
    path = CACHE / f"stack-{layers}-torch{torch.__version__}.json"
    if path.exists():
        return path.read_bytes()
    start = time.perf_counter()
    data = view_programs.stack_program(layers)
    print(f"  exported Stack({layers}) in {time.perf_counter() - start:.0f} s (cached as {path})")
    CACHE.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return data


def measure(layers: int, b: Browser | None, tmp: Path) -> None:
    """Print one size's figures."""
    program_json = program(layers)
    src = tmp / f"stack{layers}.json"
    src.write_bytes(program_json)
    nodes = len(decode(program_json, m.ExportedProgram).graph_module.graph.nodes)
    repeat = 3 if nodes < 5000 else 1
    decode_s = best_of(lambda: decode(src.read_bytes(), m.ExportedProgram), repeat)
    render_s = best_of(lambda: render_html(src), repeat)
    page = tmp / f"stack{layers}.html"
    page.write_text(render_html(src), encoding="utf-8")
    size = page.stat().st_size
    print(f"Stack({layers}) decomposed: {nodes} nodes, program JSON {len(program_json) / 1e6:.1f} MB")
    print(f"  decode program JSON (baseline): {decode_s:.2f} s")
    print(f"  render to HTML: {render_s:.2f} s = {render_s / decode_s:.2f}x decode")
    print(f"  page: {size / 1e6:.1f} MB = {size / len(program_json):.2f}x the program JSON")
    if b is None:
        return
    runs = []
    for _ in range(2):
        wall = b.open(page)
        b.eval(_PAINTED)
        runs.append((wall, b.eval("opwireView.readyMs") / 1000, b.eval(_BOXES)))
    wall, script, shown = min(runs)
    verdict = "" if nodes < 9000 else f"   (target < 3 s: {'ok' if wall < 3 else 'MISSED'})"
    print(
        f"  interactive in headless Chromium: {wall:.2f} s from navigation ({script:.2f} s in the page's script, "
        f"{shown} boxes drawn){verdict}"
    )
    t = time.perf_counter()
    b.eval("document.querySelector('g.k-group').dispatchEvent(new MouseEvent('click', {bubbles: true}))")
    b.wait("opwireView.renders >= 2", 300)
    b.eval(_PAINTED)
    print(f"  open one collapsed group: {time.perf_counter() - t:.2f} s")
    t = time.perf_counter()
    b.click("#expand")
    b.wait("opwireView.renders >= 3", 300)
    b.eval(_PAINTED)
    expand = time.perf_counter() - t
    stats = b.eval("document.getElementById('stats').textContent")
    print(f"  expand all: {expand:.2f} s ({stats}; {b.eval(_BOXES)} boxes in the DOM, the rest drawn when scrolled to)")
    t = time.perf_counter()
    b.eval("opwireView.home()")
    for _ in range(20):
        b.key("ArrowDown")
    b.eval(_PAINTED)
    print(f"  pan 20 steps through the expanded program: {time.perf_counter() - t:.2f} s")


def main() -> None:
    if CHROMIUM is None:
        print("interactive: SKIPPED, no chromium installed (apt-get install chromium)")
    with tempfile.TemporaryDirectory() as tmp:
        if CHROMIUM is None:
            for layers in LAYERS:
                measure(layers, None, Path(tmp))
            return
        with Browser(timeout=300) as b:
            for layers in LAYERS:
                measure(layers, b, Path(tmp))


if __name__ == "__main__":
    main()
