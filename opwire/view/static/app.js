/* opwire view: state, events, search, keyboard zoom and pan. window.opwireView is the page's small API
   (tests and benchmarks drive it; people use the mouse and keys). */
"use strict";
(function () {
  var OW = window.OW, t0 = performance.now();
  var data = JSON.parse(document.getElementById("opwire-data").textContent);
  var idx = OW.index(data), findings = data.findings || null;
  var state = { open: new Set(), hops: new Set(), selected: null, matches: [], matchAt: -1, query: "" };
  var scene = new OW.Scene(data, idx, state);
  var depth = data.groups.map(function (g) { var n = 0; for (var p = g.parent; p >= 0; p = data.groups[p].parent) n++; return n; });
  var own = { "-1": 1 }; // boxes a group shows when open: its own nodes and inputs, its child groups (-1: the root)
  data.groups.forEach(function (g, i) { own[i] = own[i] || 0; own[g.parent] = (own[g.parent] || 0) + 1; });
  data.graph.nodes.forEach(function (n) { own[n.g] = (own[n.g] || 0) + 1; });
  data.graph.inputs.forEach(function (n) { own[n.g] = (own[n.g] || 0) + 1; });
  var byDepth = data.groups.map(function (_, i) { return i; }).sort(function (a, b) { return depth[a] - depth[b] || a - b; });
  var svg = document.getElementById("canvas"), vp = document.getElementById("viewport");
  var panel = new OW.Panel(document.getElementById("panel"), data, idx, findings);
  var view = { x: 0, y: 0, k: 1 }, built = null, RANK = { error: 4, warning: 3, info: 2, ok: 1 };

  function findingsFor(node, scope, all) {
    if (!findings) return all ? [] : null;
    var list = [].concat(scope === "" ? findings.nodes[node.n] || [] : [], findings.targets[node.tf] || []);
    if (all) return list;
    var worst = null, origin = null;
    list.forEach(function (f) {
      if (!worst || RANK[f.severity] > RANK[worst]) { worst = f.severity; origin = f.origin || null; }
    });
    if (scope === "" && findings.first === node.n) worst = "first";
    /* the scene adds "f-" + this: "error o-inherited" gives classes f-error and o-inherited */
    return worst && origin ? worst + " o-" + OW.originKind(origin) : worst;
  }

  function apply() {
    vp.setAttribute("transform", "translate(" + view.x.toFixed(1) + "," + view.y.toFixed(1) + ") scale(" + view.k.toFixed(4) + ")");
    draw(false);
  }

  /* Draw the scene. A big one (past OW.CULL_OVER boxes) is drawn only around the screen, again when the view leaves
     what was drawn; far out, boxes lose their text. Every box keeps its place in `built`. */
  var drawn = null, pending = false;
  function draw(force) {
    if (!built) return;
    if (scene.count(built) <= OW.CULL_OVER) {
      if (force) { vp.innerHTML = scene.svg(built, findingsFor, null, false); drawn = null; marks(); }
      return;
    }
    var r = svg.getBoundingClientRect(), w = r.width / view.k, h = r.height / view.k, x = -view.x / view.k, y = -view.y / view.k;
    var lod = view.k < OW.TEXT_ZOOM;
    if (!force && drawn && drawn.lod === lod && x >= drawn.r[0] && y >= drawn.r[1] && x + w <= drawn.r[2] && y + h <= drawn.r[3]) return;
    if (!force && pending) return;
    var go = function () {
      pending = false;
      var x2 = -view.x / view.k, y2 = -view.y / view.k, m = 0.75 * Math.max(w, h);
      drawn = { lod: view.k < OW.TEXT_ZOOM, r: [x2 - m, y2 - m, x2 + w + m, y2 + h + m] };
      vp.innerHTML = scene.svg(built, findingsFor, drawn.r, drawn.lod);
      marks();
    };
    if (force) go(); else { pending = true; requestAnimationFrame(go); }
  }

  function marks() { markMatches(); if (state.selected) mark(state.selected); }

  function note(text) { document.getElementById("note").textContent = text || ""; }

  /* Open module groups breadth-first while the page shows at most `budget` boxes; returns how many did not fit. */
  function openWithin(budget) {
    var left = 0, shown = own[-1];
    state.open = new Set();
    byDepth.forEach(function (g) {
      var p = data.groups[g].parent;
      if (p >= 0 && !state.open.has(p)) { left++; return; }
      // a group of one node opens whatever the budget: a box that hides one node hides it for nothing (and left
      // the batch norms of a ResNet, whose groups hold four weights each, as the only closed boxes)
      if (shown + own[g] - 1 > budget && idx.groupSize[g] > 1) { left++; return; }
      state.open.add(g); shown += own[g] - 1; // its box gives way to what it holds
    });
    return left;
  }

  /* Apply `change` and draw, unless that shows more boxes than dagre can lay out: then `undo` it and say so. */
  function render(change, undo) {
    if (change) change();
    var b = scene.build(), t = performance.now(), n = scene.count(b);
    if (undo && n > OW.MAX_VISIBLE) {
      undo();
      note("opening that shows " + n + " boxes; the page lays out at most " + OW.MAX_VISIBLE + ": collapse others first (C)");
      return false;
    }
    if (n > OW.MAX_VISIBLE) { openWithin(OW.OPEN_BUDGET); b = scene.build(); }
    note("");
    built = scene.layout(b);
    draw(true);
    document.getElementById("stats").textContent = data.graph.nodes.length + " nodes · " +
      Object.keys(built.items).length + " shown · layout " + Math.round(performance.now() - t) + " ms";
    api.renders++;
    return true;
  }

  function fit() {
    var r = svg.getBoundingClientRect(), w = built.width || 1, h = built.height || 1;
    view.k = Math.min(1.2, Math.max(0.02, Math.min(r.width / w, r.height / h) * 0.95));
    view.x = (r.width - w * view.k) / 2; view.y = Math.max(8, (r.height - h * view.k) / 2);
    apply();
  }

  /* The first screen: the whole program when it is legible at once, else the user inputs at a readable zoom. */
  function home() {
    var r = svg.getBoundingClientRect(), w = built.width || 1, h = built.height || 1;
    if (Math.min(r.width / w, r.height / h) * 0.95 >= OW.READABLE) { fit(); return; }
    var starts = Object.keys(built.items).filter(function (id) {
      var it = built.items[id];
      return it.kind === "input" && it.scope === "" && it.cat === "user input";
    }).map(function (id) { return built.items[id]; });
    if (!starts.length) { // no user input (an extern-node file): the topmost boxes
      var top = Infinity;
      Object.keys(built.items).forEach(function (id) { var it = built.items[id]; if (it.kind !== "cluster") top = Math.min(top, it.y); });
      starts = Object.keys(built.items).map(function (id) { return built.items[id]; }).filter(function (it) { return it.kind !== "cluster" && it.y === top; });
    }
    var y0 = Infinity, x0 = Infinity, x1 = -Infinity, k = OW.HOME_ZOOM, sw = r.width / k;
    function span(list) {
      var a = Infinity, b = -Infinity;
      list.forEach(function (it) { a = Math.min(a, it.x - it.width / 2); b = Math.max(b, it.x + it.width / 2); });
      return [a, b];
    }
    starts.forEach(function (it) { y0 = Math.min(y0, it.y - it.height / 2); });
    // the inputs and the first boxes that read them, when they fit on the screen together
    var ids = {}, near = starts.slice();
    Object.keys(built.items).forEach(function (id) { if (starts.indexOf(built.items[id]) >= 0) ids[id] = 1; });
    Object.keys(built.edges).forEach(function (key) {
      var e = built.edges[key], b = built.items[e.w];
      if (ids[e.v] && b && b.y - y0 < r.height / k * 0.6) near.push(b);
    });
    var all = span(near), inputs = span(starts);
    if (all[1] - all[0] <= sw) { x0 = all[0]; x1 = all[1]; } else { x0 = inputs[0]; x1 = inputs[1]; }
    view.k = k;
    var cx = x1 - x0 <= sw ? (x0 + x1) / 2 : x0 + sw / 2; // all of them, else the first ones
    view.x = r.width / 2 - cx * view.k; view.y = 24 - y0 * view.k;
    apply();
  }

  function center(item) {
    var r = svg.getBoundingClientRect();
    view.k = Math.max(view.k, 0.8);
    view.x = r.width / 2 - item.x * view.k; view.y = r.height / 2 - item.y * view.k;
    apply();
  }

  function mark(key) {
    Array.prototype.forEach.call(vp.querySelectorAll(".selected"), function (e) { e.classList.remove("selected"); });
    var el = vp.querySelector('[data-item="' + CSS.escape(key) + '"]');
    if (el) el.classList.add("selected");
  }

  function markMatches() {
    var set = new Set(state.matches);
    Array.prototype.forEach.call(vp.querySelectorAll("g.node[data-node]"), function (el) {
      el.classList.toggle("match", set.has(el.getAttribute("data-item")));
    });
  }

  /* Make a node (or input) visible: open its module groups and the HOP subgraphs around it. */
  function reveal(key) {
    var rec = idx.nodes[key], changed = false;
    if (!rec && key.indexOf("|i|") === 0) {
      var inp = data.graph.inputs.filter(function (i) { return "|i|" + i.name === key; })[0];
      rec = inp ? { scope: "", node: { g: inp.g } } : null;
    }
    if (!rec) return false;
    var top = rec;
    while (top.scope !== "") {
      var hop = idx.scopes[top.scope].hop;
      if (!state.hops.has(hop)) { state.hops.add(hop); changed = true; }
      top = idx.nodes[hop];
    }
    var chain = [];
    for (var g = top.node.g; g >= 0; g = data.groups[g].parent) { chain.push(g); if (!state.open.has(g)) { state.open.add(g); changed = true; } }
    if (changed && scene.count(scene.build()) > OW.MAX_VISIBLE) state.open = new Set(chain); // show it, close the rest
    if (changed) render();
    return true;
  }

  function select(key, centerOn) {
    if (!reveal(key)) return false;
    state.selected = key; mark(key);
    if (idx.nodes[key]) panel.node(key, findingsFor); else panel.summary();
    if (centerOn && built.items[key]) center(built.items[key]);
    return true;
  }

  /* Re-render after `change`, keeping item `key` where it was on screen (opening in place). */
  function inPlace(key, change, undo) {
    var before = built && built.items[key];
    var sx = before ? before.x * view.k + view.x : 0, sy = before ? before.y * view.k + view.y : 0;
    if (!render(change, undo)) return;
    var after = built.items[key];
    if (before && after) { view.x = sx - after.x * view.k; view.y = sy - after.y * view.k; apply(); }
  }

  function toggleHop(key) {
    var open = state.hops.has(key);
    inPlace(key, function () { if (open) state.hops.delete(key); else state.hops.add(key); },
      function () { if (open) state.hops.add(key); else state.hops.delete(key); });
  }

  function search(q) {
    state.query = q; q = q.trim().toLowerCase();
    state.matches = !q ? [] : Object.keys(idx.nodes).filter(function (k) {
      var n = idx.nodes[k].node;
      return n.n.toLowerCase().indexOf(q) >= 0 || n.tf.toLowerCase().indexOf(q) >= 0;
    });
    state.matchAt = -1;
    document.getElementById("matches").textContent = q ? state.matches.length + " found" : "";
    markMatches();
    if (q) panel.results(state.query, state.matches); else panel.summary();
  }

  function nextMatch() {
    if (!state.matches.length) return;
    state.matchAt = (state.matchAt + 1) % state.matches.length;
    var key = state.matches[state.matchAt];
    reveal(key); markMatches(); select(key, true); // the panel shows the node; typing again lists the matches
  }

  function zoom(f, cx, cy) {
    var r = svg.getBoundingClientRect();
    cx = cx === undefined ? r.width / 2 : cx; cy = cy === undefined ? r.height / 2 : cy;
    var k = Math.min(4, Math.max(0.02, view.k * f));
    view.x = cx - (cx - view.x) * (k / view.k); view.y = cy - (cy - view.y) * (k / view.k); view.k = k;
    apply();
  }

  function setAll(open) {
    var left = open ? openWithin(OW.MAX_VISIBLE) : (state.open = new Set(), 0);
    render(); fit();
    if (left) note(left + " module groups stay collapsed: the page lays out at most " + OW.MAX_VISIBLE + " boxes");
  }

  svg.addEventListener("click", function (ev) {
    var t = ev.target.closest("[data-toggle],[data-group],[data-item]");
    if (!t) return;
    if (t.hasAttribute("data-toggle")) { toggleHop(t.getAttribute("data-toggle")); return; }
    if (t.hasAttribute("data-group")) {
      var g = +t.getAttribute("data-group"), gk = "|g|" + g;
      if (t.classList.contains("cluster")) {
        if (!ev.target.classList.contains("chead")) return; // the header collapses an open group
        inPlace(gk, function () { state.open.delete(g); });
      } else inPlace(gk, function () { state.open.add(g); }, function () { state.open.delete(g); }); // a collapsed box opens
      return;
    }
    var key = t.getAttribute("data-item");
    if (key === OW.UNUSED) { state.selected = key; mark(key); panel.unused(); return; }
    if (t.classList.contains("cluster") && t.hasAttribute("data-hop")) {
      if (ev.target.classList.contains("chead")) toggleHop(t.getAttribute("data-hop"));
      return;
    }
    select(key, false);
  });
  svg.addEventListener("dblclick", function (ev) {
    var t = ev.target.closest("g.k-hop");
    if (t) toggleHop(t.getAttribute("data-item"));
  });
  document.getElementById("panel").addEventListener("click", function (ev) {
    var a = ev.target.closest("[data-goto],[data-back],[data-toggle]");
    if (!a) return;
    ev.preventDefault();
    if (a.hasAttribute("data-back")) { state.selected = null; mark(""); panel.summary(); return; }
    if (a.hasAttribute("data-toggle")) { toggleHop(a.getAttribute("data-toggle")); return; }
    select(a.getAttribute("data-goto"), true);
  });
  var drag = null;
  svg.addEventListener("mousedown", function (ev) { drag = { x: ev.clientX - view.x, y: ev.clientY - view.y }; });
  window.addEventListener("mousemove", function (ev) { if (drag) { view.x = ev.clientX - drag.x; view.y = ev.clientY - drag.y; apply(); } });
  window.addEventListener("mouseup", function () { drag = null; });
  svg.addEventListener("wheel", function (ev) {
    ev.preventDefault();
    var r = svg.getBoundingClientRect();
    zoom(ev.deltaY < 0 ? 1.15 : 1 / 1.15, ev.clientX - r.left, ev.clientY - r.top);
  }, { passive: false });
  var box = document.getElementById("search");
  box.addEventListener("input", function () { search(box.value); });
  box.addEventListener("keydown", function (ev) {
    if (ev.key === "Enter") { ev.preventDefault(); nextMatch(); }
    if (ev.key === "Escape") { box.value = ""; search(""); box.blur(); svg.focus(); }
  });
  document.getElementById("expand").onclick = function () { setAll(true); };
  document.getElementById("collapse").onclick = function () { setAll(false); };
  document.getElementById("fit").onclick = function () { fit(); };
  var firstBtn = document.getElementById("first");
  if (findings && findings.first) { firstBtn.hidden = false; firstBtn.onclick = function () { select("|n|" + findings.first, true); }; }
  window.addEventListener("keydown", function (ev) {
    if (ev.target === box || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    var step = 60, keys = {
      "+": function () { zoom(1.25); }, "=": function () { zoom(1.25); }, "-": function () { zoom(0.8); },
      "0": function () { fit(); }, h: function () { home(); }, Home: function () { home(); }, ArrowLeft: function () { view.x += step; apply(); }, ArrowRight: function () { view.x -= step; apply(); },
      ArrowUp: function () { view.y += step; apply(); }, ArrowDown: function () { view.y -= step; apply(); },
      "/": function () { box.focus(); box.select(); }, e: function () { setAll(true); }, c: function () { setAll(false); },
      f: function () { if (findings && findings.first) select("|n|" + findings.first, true); },
      Escape: function () { state.selected = null; mark(""); panel.summary(); },
    };
    var fn = keys[ev.key];
    if (fn) { ev.preventDefault(); fn(); }
  });

  var api = window.opwireView = {
    renders: 0, render: render, fit: fit, home: home, reveal: reveal, select: select, toggleHop: toggleHop, search: search, expandAll: function () { setAll(true); },
    view: view, state: state, index: idx, built: function () { return built; },
  };
  openWithin(OW.OPEN_BUDGET);
  render(); home(); panel.summary();
  api.readyMs = performance.now() - t0;
  document.body.setAttribute("data-ready", "1");
})();
