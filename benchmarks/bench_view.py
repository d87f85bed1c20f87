"""`opwire view` on a ~2,000-node program: HTML render time, time to interactive in headless Chromium, page size.

Targets (issue 13): render < 2 s, interactive < 3 s, page within a few times the program's JSON. The
baseline measured in the same run is opwire's own decode of the program JSON (what any reader of the
file pays first); the render is reported as a ratio to it. Chromium is Debian's `chromium`; without it
the browser figures are skipped (and the script says so).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import view_programs
from _timing import best_of
from browser import CHROMIUM, Browser

from opwire.schema import models as m
from opwire.serde.json import decode
from opwire.view import render_html

_BOXES = "document.querySelectorAll('g.node').length"
LAYERS = int(os.environ.get("OPWIRE_BENCH_VIEW_LAYERS", "28"))  # Stack(28), decomposed: ~2,050 nodes


def main() -> None:
    start = time.perf_counter()
    program_json = view_programs.stack_program(LAYERS)
    nodes = len(decode(program_json, m.ExportedProgram).graph_module.graph.nodes)
    print(
        f"program: Stack({LAYERS}) decomposed, {nodes} nodes, {len(program_json) / 1e6:.2f} MB JSON "
        f"(exported in {time.perf_counter() - start:.0f} s)"
    )
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "model.json"
        src.write_bytes(program_json)
        decode_s = best_of(lambda: decode(src.read_bytes(), m.ExportedProgram), 3)
        render_s = best_of(lambda: render_html(src), 3)
        page = Path(tmp) / "model.html"
        page.write_text(render_html(src), encoding="utf-8")
        size = page.stat().st_size
        print(f"decode program JSON (baseline): {decode_s:.3f} s")
        print(
            f"render to HTML: {render_s:.3f} s = {render_s / decode_s:.2f}x decode   (target < 2 s: "
            f"{'ok' if render_s < 2 else 'MISSED'})"
        )
        print(f"page size: {size / 1e6:.2f} MB = {size / len(program_json):.2f}x the program JSON")
        if CHROMIUM is None:
            print("interactive: SKIPPED, no chromium installed (apt-get install chromium)")
            return
        with Browser(timeout=300) as b:
            runs = []
            for _ in range(3):
                wall = b.open(page)
                runs.append((wall, b.eval("opwireView.readyMs") / 1000, b.eval(_BOXES)))
            wall, script, shown = min(runs)
            print(
                f"interactive in headless Chromium: {wall:.3f} s from navigation ({script:.3f} s in the page's "
                f"script; {shown} boxes drawn)   (target < 3 s: {'ok' if wall < 3 else 'MISSED'})"
            )
            t = time.perf_counter()
            b.key("0")
            b.click("g.k-group")
            b.wait("opwireView.renders >= 2", 300)
            print(f"open one collapsed group: {time.perf_counter() - t:.3f} s")
            t = time.perf_counter()
            b.click("#expand")
            b.wait("opwireView.renders >= 3", 300)
            print(
                f"expand all (up to {b.eval('OW.MAX_VISIBLE')} boxes): {time.perf_counter() - t:.3f} s, "
                f"{b.eval(_BOXES)} boxes"
            )


if __name__ == "__main__":
    main()
