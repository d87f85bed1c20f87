"""`opwire view` pages in a real browser (headless Chromium over the DevTools protocol).

Every corpus program (both IRs): every node is on the page (`data-node`) once groups are expanded, and at
load every node is either drawn or inside a drawn collapsed group; HOP subgraphs open in place; search,
the side panel, keyboard zoom and the findings overlay work. Screenshots go to pytest's tmp dir, or to
docs/ with OPWIRE_DOCS_SCREENSHOTS=1.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import corpus
from support.browser import CHROMIUM, Browser
from torch._export.serde.serialize import serialize

from opwire.cli import main
from opwire.schema import models as m
from opwire.serde.json import decode
from opwire.view import view

pytestmark = pytest.mark.xdist_group("view_browser")  # the module-scoped fixture is built once, on one worker

if CHROMIUM is None:
    pytest.skip(
        "SKIPPED LOUDLY: no chromium here, so the page tests of `opwire view` did not run "
        "(apt-get install chromium; CI's .ci/run installs it)",
        allow_module_level=True,
    )

pytestmark = pytest.mark.xdist_group("view_browser")  # one browser per module: keep its tests on one worker
DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with Browser() as b:
        yield b


def _shot(b: Browser, tmp_path: Path, name: str, doc: bool = True) -> Path:
    """A screenshot in tmp_path; with OPWIRE_DOCS_SCREENSHOTS=1 also docs/view-<name>.png (one per page type)."""
    out = b.screenshot(tmp_path / f"{name}.png")
    assert out.stat().st_size > 10_000 and out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if doc and os.environ.get("OPWIRE_DOCS_SCREENSHOTS"):
        b.screenshot(DOCS / f"view-{name}.png")
    return out


def _open(b: Browser, page: Path) -> None:
    b.errors.clear()
    b.open(page)
    assert b.errors == []


def _drawn(b: Browser, scope: str = "") -> list[str]:
    return b.eval(
        f"[...document.querySelectorAll('g.node[data-node][data-scope={json.dumps(scope)}]')].map(e => e.dataset.node)"
    )  # type: ignore[no-any-return]


# real programs, both IRs: multi-output nodes (batch norm), dynamic sizes, module groups, custom ops, an LSTM;
# every corpus program's page data is checked node by node in test_view_model (one page load each is too slow)
PAGES = (
    "resnet/decomposed",
    "resnet/training",
    "transformer/decomposed",
    "conv_bn/decomposed",
    "dynamic/training",
    "lstm/decomposed",
    "custom_op/training",
)


def _program(name: str, resnet_eps: dict[str, Any]) -> tuple[m.ExportedProgram, list[str], list[str]]:
    """The program as torch serialized it, its fx call nodes but getitem (outputs of their node), its unused inputs."""
    ep = resnet_eps[name.split("/")[1]] if name.startswith("resnet/") else corpus.get_program(name).ep
    fx = [n.name for n in ep.graph.nodes if n.op == "call_function" and "getitem" not in str(n.target)]
    unused = [n.name for n in ep.graph.nodes if n.op == "placeholder" and not n.users]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data = serialize(ep).exported_program
    return decode(data, m.ExportedProgram), fx, unused


_HIDDEN = (
    "(() => { const d = JSON.parse(document.getElementById('opwire-data').textContent);"
    " const drawn = new Set([...document.querySelectorAll('[data-node][data-scope=\"\"]')].map(e => e.dataset.node));"
    " const boxes = new Set([...document.querySelectorAll('g.k-group')].map(e => +e.dataset.group));"
    " return d.graph.nodes.filter(n => { if (drawn.has(n.n)) return false;"
    "   for (let g = n.g; g >= 0; g = d.groups[g].parent) if (boxes.has(g)) return false; return true; }).map(n => n.n); })()"
)
_ON_SCREEN = (
    "(() => { const c = document.getElementById('canvas').getBoundingClientRect();"
    " return [...document.querySelectorAll('g.c-user-input')].filter(e => { const r = e.getBoundingClientRect();"
    " return r.left >= c.left && r.right <= c.right && r.top >= c.top && r.bottom <= c.bottom; }).length; })()"
)


@pytest.mark.parametrize("name", PAGES)
def test_every_node_of_real_programs(browser: Browser, tmp_path: Path, resnet_eps: dict[str, Any], name: str) -> None:
    program, fx, unused = _program(name, resnet_eps)
    names = [n.name for n in program.graph_module.graph.nodes]
    assert set(fx) <= set(names)
    page = view(program, tmp_path / "p.html", title=name)
    _open(browser, page)
    assert browser.eval(_HIDDEN) == [], "nodes neither drawn nor inside a collapsed group"
    # the first screen: the user inputs, readable; sizes by name; inputs nothing reads in one box
    assert browser.eval(_ON_SCREEN) >= 1 and browser.eval("opwireView.view.k") >= browser.eval("OW.READABLE") - 1e-9
    assert "Symbol(" not in browser.eval("document.getElementById('viewport').textContent")
    drawn_inputs = set(browser.eval("[...document.querySelectorAll('[data-input]')].map(e => e.dataset.input)"))
    assert not drawn_inputs & set(unused)
    if unused:
        assert browser.eval("document.querySelector('[data-unused]').textContent").startswith(f"{len(unused)} unused")
    if name.startswith("resnet/"):  # small enough to open whole: every batch norm on the page at load
        assert sorted(_drawn(browser)) == sorted(names)
    if name == "transformer/decomposed":
        _shot(browser, tmp_path, "program")
    browser.click("#expand")
    browser.wait("opwireView.renders >= 2")
    assert sorted(_drawn(browser)) == sorted(names)
    assert browser.errors == []
    if name == "conv_bn/decomposed":
        _shot(browser, tmp_path, "expanded", doc=False)


def test_hop_subgraphs_open_in_place(browser: Browser, tmp_path: Path, hops_json: bytes) -> None:
    page = view(decode(hops_json, m.ExportedProgram), tmp_path / "hops.html", title="cond, map, while_loop")
    _open(browser, page)
    assert _drawn(browser, "|n|cond/true_graph_0") == []
    for i, hop in enumerate(["cond", "map_impl", "while_loop"]):
        browser.key("0")  # fit, so the node is on screen to click
        browser.click(f'[data-node="{hop}"] .toggle')
        browser.wait(f"opwireView.renders >= {i + 2}")
    assert _drawn(browser, "|n|cond/true_graph_0") == ["linear", "relu"]
    assert _drawn(browser, "|n|cond/false_graph_0") == ["cos"]
    assert _drawn(browser, "|n|map_impl/body_graph_0") == ["sin", "mul"]
    assert sorted(_drawn(browser, "|n|while_loop/while_loop_body_graph_0")) == ["add", "mul"]
    assert browser.eval("document.querySelectorAll('[data-input][data-scope=\"|n|cond/true_graph_0\"]').length") == 3
    browser.key("0")
    _shot(browser, tmp_path, "hops")
    browser.click('[data-node="cond"] .toggle')  # and closed again
    browser.wait("opwireView.renders >= 5")
    assert _drawn(browser, "|n|cond/true_graph_0") == []
    assert browser.errors == []


def test_corpus_cond_on_a_symbool_opens(browser: Browser, tmp_path: Path) -> None:
    page = view(decode(corpus.get_serialized("dynamic/training").json_bytes, m.ExportedProgram), tmp_path / "d.html")
    _open(browser, page)
    hop = browser.eval("document.querySelector('g.k-hop').dataset.node")
    browser.key("0")
    browser.click(f'[data-node="{hop}"] .toggle')
    browser.wait("opwireView.renders >= 2")
    scopes = browser.eval(
        "[...new Set([...document.querySelectorAll('g.node[data-scope]')].map(e => e.dataset.scope))]"
    )
    assert len([s for s in scopes if s.startswith(f"|n|{hop}/")]) == 2


def test_search_side_panel_and_keys(browser: Browser, tmp_path: Path) -> None:
    page = view(decode(corpus.get_program("transformer/decomposed").json_bytes, m.ExportedProgram), tmp_path / "t.html")
    _open(browser, page)
    browser.key("/", text="/")
    assert browser.eval("document.activeElement.id") == "search"
    browser.type("addmm")
    browser.wait("document.getElementById('matches').textContent !== ''")
    found = browser.eval("document.getElementById('matches').textContent")
    n = sum(1 for x in corpus.get_program("transformer/decomposed").ep.graph.nodes if "addmm" in str(x.target))
    assert found == f"{n} found" and n > 0
    browser.key("Enter")
    browser.wait("document.querySelector('g.node.selected') !== null")
    selected = browser.eval("document.querySelector('g.node.selected').dataset.node")
    panel = browser.eval("document.getElementById('panel').innerText")
    assert selected.startswith("addmm") and "torch.ops.aten.addmm.default" in panel
    for heading in ("ARGUMENTS", "OUTPUTS", "SOURCE", "dtype", "strides", "device"):
        assert heading.lower() in panel.lower()
    assert browser.eval("document.querySelectorAll('g.node.match').length") >= 1
    browser.key("Escape")
    k = browser.eval("opwireView.view.k")
    browser.eval("document.getElementById('canvas').focus()")
    browser.key("+", text="+")
    assert browser.eval("opwireView.view.k") > k
    x = browser.eval("opwireView.view.x")
    browser.key("ArrowLeft")
    assert browser.eval("opwireView.view.x") == x + 60
    _shot(browser, tmp_path, "search", doc=False)


def test_findings_overlay_marks_the_injected_mismatch(browser: Browser, tmp_path: Path) -> None:
    from test_view_runs import _files

    prog, x = _files(tmp_path)
    bad, _ = _files(tmp_path, perturb="net.2.weight")
    nodes, findings = tmp_path / "a.nodes", tmp_path / "f.json"
    assert main(["run", prog, "--inputs", x, "--save-nodes", str(nodes)]) == 0
    assert main(["run", bad, "--inputs", x, "--compare-nodes", str(nodes), "--findings", str(findings)]) == 1
    page = tmp_path / "f.html"
    assert main(["view", bad, "--findings", str(findings), "--out", str(page)]) == 0
    _open(browser, page)
    cls = browser.eval(
        "Object.fromEntries([...document.querySelectorAll('g.node[data-node]')].map(e => [e.dataset.node, e.getAttribute('class')]))"
    )
    assert "f-first" in cls["permute_1"]
    assert "f-error" in cls["addmm_1"] and "f-ok" in cls["relu"] and "f-ok" in cls["permute"]
    # the perturbed weight's transpose differs first (local); addmm_1 only received it (inherited): two colours
    assert "o-local" in cls["permute_1"] and "o-inherited" in cls["addmm_1"] and "o-" not in cls["relu"]
    stroke = "(s => getComputedStyle(document.querySelector(s)).{}).call(null, {})"
    inherited = browser.eval(stroke.format("stroke", json.dumps('g.node[data-node="addmm_1"] > rect')))
    legend = {
        kind: browser.eval(stroke.format("borderTopColor", json.dumps(f".legend .sw.o-{kind}")))
        for kind in ("local", "inherited")
    }
    assert legend["local"] != legend["inherited"] and inherited == legend["inherited"]
    text = browser.eval("document.querySelector('.legend').innerText")
    assert "local: the node itself computes differently" in text and "inherited: it received an input" in text
    browser.click("#first")
    browser.wait("document.querySelector('g.node.selected') !== null")
    assert browser.eval("document.querySelector('g.node.selected').dataset.node") == "permute_1"
    assert "largest difference 0.5" in browser.eval("document.getElementById('panel').innerText")
    assert "node_mismatch" in browser.eval("document.getElementById('panel').innerText")
    _shot(browser, tmp_path, "findings")


def test_big_program_opens_collapsed(browser: Browser, tmp_path: Path, stack_json: bytes) -> None:
    page = view(decode(stack_json, m.ExportedProgram), tmp_path / "s.html", title="3 encoder layers")
    _open(browser, page)
    groups = browser.eval("document.querySelectorAll('g.k-group').length")
    shown = browser.eval("document.querySelectorAll('g.node').length")
    assert groups > 0 and shown <= 200
    before = len(_drawn(browser))
    browser.key("0")
    browser.click("g.k-group")
    browser.wait("opwireView.renders >= 2")
    assert len(_drawn(browser)) > before
    assert browser.errors == []
    _shot(browser, tmp_path, "collapsed")
    # what a 10,000-node program does, at this size: containers laid out in stacked runs, only what is around the
    # screen in the DOM; every node still has a place, and going to it draws it
    names = [n.name for n in decode(stack_json, m.ExportedProgram).graph_module.graph.nodes]
    browser.eval("OW.CULL_OVER = 40; OW.SEGMENT = 6; OW.layoutCache.clear(); opwireView.expandAll(); opwireView.home()")
    browser.eval("new Promise(r => requestAnimationFrame(() => r(1)))")
    assert 0 < len(_drawn(browser)) < len(names)
    placed = browser.eval(
        "Object.values(opwireView.built().items).filter(i => i.kind === 'op' && i.scope === '' && isFinite(i.x) && isFinite(i.y)).length"
    )
    assert placed == len(names)
    for name in names[:: max(1, len(names) // 25)] + names[-1:]:
        browser.eval(f"opwireView.select('|n|' + {json.dumps(name)}, true)")
        browser.eval("new Promise(r => requestAnimationFrame(() => r(1)))")
        assert browser.eval(f"document.querySelector('[data-node={json.dumps(name)}]') !== null"), name
    assert browser.errors == []


@pytest.mark.slow
def test_aotinductor_extern_node_file(browser: Browser, tmp_path: Path, aoti_package: Path) -> None:
    """A real AOTInductor package: its extern-kernel nodes (the custom-op calls) drawn as a graph."""
    page = tmp_path / "aoti.html"
    assert main(["view", str(aoti_package), "--out", str(page)]) == 0
    _open(browser, page)
    data = browser.eval("JSON.parse(document.getElementById('opwire-data').textContent)")
    assert data["kind"] == "extern" and len(data["graph"]["nodes"]) == 2
    assert sorted(_drawn(browser)) == sorted(n["n"] for n in data["graph"]["nodes"])
    assert browser.eval("document.querySelectorAll('g.node.k-input').length") >= 1
    assert browser.eval("document.querySelectorAll('g.edge').length") >= 2  # inputs -> foo -> multi -> outputs
    first = data["graph"]["nodes"][0]["n"]  # the foo call; the second calls multi
    browser.click(f"g.node[data-node={json.dumps(first)}]")
    assert "opwire_aoti_test::foo" in browser.eval("document.getElementById('panel').innerText")
    _shot(browser, tmp_path, "aoti")
