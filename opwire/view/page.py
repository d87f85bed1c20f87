"""The self-contained HTML page: the program's data as JSON, the stylesheet, dagre and the page's scripts inline.

Nothing is fetched when the page opens: no URL appears in it except the ones inside the data itself,
which the page shows as text.
"""

from __future__ import annotations

import html
import json
from functools import cache
from importlib import resources
from typing import Any

from opwire._version import __version__

__all__ = ["DAGRE_VERSION", "SCRIPTS", "render_page"]

# nothing may be fetched: inline scripts and styles only
_CSP = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:"
# the page's scripts, in load order (dagre first: it defines the global `dagre`)
DAGRE_VERSION = "3.1.3"  # opwire/view/static/dagre.min.js, from `npm pack @dagrejs/dagre`
SCRIPTS = ("dagre.min.js", "scene.js", "panel.js", "app.js")


@cache
def _static(name: str) -> str:
    return resources.files("opwire.view").joinpath("static", name).read_text(encoding="utf-8")


def _script_text(text: str) -> str:
    """Script or JSON text made safe inside <script>: `</` cannot end the element early."""
    return text.replace("</", "<\\/")


def _json(data: Any) -> str:
    text = json.dumps(data, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def render_page(data: dict[str, Any]) -> str:
    """The HTML page for the data of `opwire.view.model.page_data` (with its `findings`)."""
    scripts = "\n".join(f"<script>/* {name} */\n{_script_text(_static(name))}\n</script>" for name in SCRIPTS)
    title = html.escape(str(data.get("title", "program")))
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="generator" content="opwire {html.escape(__version__)}">
<meta http-equiv="Content-Security-Policy" content="{_CSP}">
<title>{title} · opwire view</title>
<style>
{_static("view.css")}
</style>
</head>
<body>
<header id="bar">
  <span id="title">{title}</span>
  <span id="stats"></span>
  <input id="search" type="search" placeholder="search names and targets  ( / )" autocomplete="off" spellcheck="false">
  <span id="matches"></span>
  <button id="expand" title="expand every module group (E)">expand all</button>
  <button id="collapse" title="collapse module groups (C)">collapse</button>
  <button id="fit" title="fit to window (0)">fit</button>
  <button id="first" title="go to the first diverging node (F)" hidden>first divergence</button>
  <span id="note"></span>
</header>
<main>
  <svg id="canvas" tabindex="0" role="img" aria-label="program graph"><g id="viewport"></g></svg>
  <aside id="panel"></aside>
</main>
<script type="application/json" id="opwire-data">{_json(data)}</script>
<!-- dagre {DAGRE_VERSION} (MIT, vendored from npm @dagrejs/dagre): license in opwire/view/static/dagre.LICENSE -->
{scripts}
</body>
</html>
"""
