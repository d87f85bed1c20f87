/* opwire view: the visible graph (module groups collapsed or open, HOP subgraphs open in place),
   laid out by dagre and drawn as SVG. Each program node's element carries data-node="<node name>". */
"use strict";
var OW = window.OW || (window.OW = {});

OW.esc = function (s) {
  return String(s).replace(/[&<>"']/g, function (c) {
    return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c];
  });
};

/* Index every graph scope once: scope id -> {graph, parentKey}; node key -> {scope, node}. */
OW.index = function (data) {
  var scopes = {}, nodes = {}, groupSize = data.groups.map(function () { return 0; });
  function walk(graph, scope, hopKey) {
    scopes[scope] = { graph: graph, hop: hopKey };
    graph.nodes.forEach(function (n) {
      var key = scope + "|n|" + n.n;
      nodes[key] = { scope: scope, node: n, key: key };
      if (scope === "") {
        for (var g = n.g; g >= 0; g = data.groups[g].parent) groupSize[g]++;
      }
      n.sub.forEach(function (s) { walk(s.graph, key + "/" + s.arg, key); });
    });
  }
  walk(data.graph, "", null);
  return { scopes: scopes, nodes: nodes, groupSize: groupSize };
};

OW.UNUSED = "|unused"; // the item of the inputs nothing reads
OW.READABLE = 0.55; // a zoom below this is too small to read: the first screen zooms in on the user inputs instead
OW.HOME_ZOOM = 0.9;
OW.OPEN_BUDGET = 160; // module groups open breadth-first at load while the page shows at most this many boxes

OW.Scene = function (data, idx, state) {
  this.data = data; this.idx = idx; this.state = state;
};

/* The outermost collapsed group containing group g (or -1: g and its ancestors are open). */
OW.Scene.prototype.hiddenBy = function (g) {
  var out = -1, groups = this.data.groups;
  for (; g >= 0; g = groups[g].parent) if (!this.state.open.has(g)) out = g;
  return out;
};

OW.Scene.prototype.build = function () {
  var self = this, data = this.data, groups = data.groups, st = this.state;
  var items = {}, edges = {}, parents = {};
  function add(id, item, parent) { items[id] = item; if (parent) parents[id] = parent; }
  function groupItem(g) { return "|g|" + g; }
  function placeGroup(g) { // the cluster chain of an open group, created on demand
    var id = groupItem(g);
    if (!items[id]) {
      var p = groups[g].parent;
      add(id, { kind: "cluster", group: g, label: groups[g].path + "  " + groups[g].type }, p >= 0 ? placeGroup(p) : null);
    }
    return id;
  }
  // where a top-scope member (node or input) of group g is drawn: its own item, or a collapsed group's
  function slot(g, id, item) {
    var h = self.hiddenBy(g);
    if (h >= 0) {
      var gid = groupItem(h);
      if (!items[gid]) {
        var p = groups[h].parent;
        add(gid, { kind: "group", group: h, label: groups[h].path, sub: groups[h].type + " · " + self.idx.groupSize[h] + (self.idx.groupSize[h] === 1 ? " node" : " nodes") },
          p >= 0 ? placeGroup(p) : null);
      }
      return gid;
    }
    add(id, item, g >= 0 ? placeGroup(g) : null);
    return id;
  }
  function scopeItems(scope, parent) {
    var graph = self.idx.scopes[scope].graph, top = scope === "", made = {};
    var unused = top ? graph.inputs.filter(function (inp) { return inp.unused; }) : [];
    if (unused.length) { // inputs nothing reads: one box, listed in the side panel
      var cats = {};
      unused.forEach(function (inp) { cats[inp.kind] = (cats[inp.kind] || 0) + 1; });
      add(OW.UNUSED, { kind: "unused", label: unused.length + " unused input" + (unused.length > 1 ? "s" : ""),
        sub: Object.keys(cats).map(function (k) { return cats[k] + " " + k + (cats[k] > 1 ? "s" : ""); }).join(", ") }, null);
    }
    graph.inputs.forEach(function (inp) {
      if (top && inp.unused) return;
      var id = scope + "|i|" + inp.name;
      var item = { kind: "input", cat: inp.kind, name: inp.name, scope: scope, label: inp.name, sub: inp.kind + (inp.target ? " " + inp.target : "") };
      made[inp.name] = top ? slot(inp.g, id, item) : (add(id, item, parent), id);
    });
    graph.nodes.forEach(function (n) {
      var key = scope + "|n|" + n.n, id = key;
      var item = { kind: n.sub.length ? "hop" : "op", name: n.n, scope: scope, key: key, label: n.t, sub: n.n, node: n };
      if (n.sub.length && st.hops.has(key)) {
        var cid = key + "|c";
        var cl = { kind: "cluster", hop: key, label: n.t + "  " + n.n };
        if (top) slot(n.g, cid, cl); else add(cid, cl, parent);
        if (items[cid]) {
          id = key; add(id, item, cid);
          n.sub.forEach(function (s) {
            var sid = key + "/" + s.arg, scid = sid + "|c";
            add(scid, { kind: "cluster", label: s.arg + ": " + s.name }, cid);
            scopeItems(sid, scid);
          });
        } else id = slot(n.g, id, item);
      } else id = top ? slot(n.g, id, item) : (add(id, item, parent), id);
      n.in.forEach(function (r) { if (made[r] !== undefined) edge(made[r], id, graph.values[r]); });
      n.o.forEach(function (o) { made[o] = id; });
    });
    var oid = scope + "|out";
    var kinds = {};
    graph.outputs.forEach(function (o) { kinds[o.kind] = 1; });
    if (!graph.outputs.length) return; // an extern-node file has no graph outputs
    add(oid, { kind: "output", scope: scope, label: top ? "outputs" : "subgraph outputs", sub: Object.keys(kinds).join(", ") }, top ? null : parent);
    graph.outputs.forEach(function (o) { o.refs.forEach(function (r) { if (made[r] !== undefined) edge(made[r], oid, graph.values[r]); }); });
  }
  function edge(a, b, meta) {
    if (a === b) return;
    var k = a + "\u0000" + b;
    if (edges[k]) { edges[k].n++; return; }
    edges[k] = { v: a, w: b, label: meta ? meta[0] : "", n: 1 };
  }
  scopeItems("", null);
  return { items: items, edges: edges, parents: parents };
};

OW.CULL_OVER = 1500; // past this many boxes only what is around the screen is in the DOM (the browser draws SVG text slowly)
OW.TEXT_ZOOM = 0.3; // below this zoom a big scene is drawn without text (too small to read anyway)
OW.MAX_VISIBLE = 40000; // boxes laid out at once (a 20,000-node program opened whole is ~21,000); past this the page asks to collapse groups first
OW.PAD = { side: 10, head: 22, bottom: 10 };

OW.Scene.prototype.count = function (built) {
  var n = 0;
  for (var id in built.items) if (built.items[id].kind !== "cluster") n++;
  return n;
};

/* Box sizes are rounded so that repeated blocks (layer 0, layer 1, ...) have the same shape and share a layout. */
OW.size = function (it) {
  var chars = Math.max(String(it.label).length, String(it.sub || "").length * 0.9);
  it.width = Math.min(360, Math.max(90, Math.ceil((chars * 7.2 + 24) / 24) * 24));
  it.height = it.kind === "group" ? 44 : 38;
};

OW.layoutCache = new Map(); // container shape -> its dagre layout (kept across renders: opening a group lays out only it)

/* Lay out one container (the root, an open module group, a HOP or subgraph cluster) by itself: its direct members
   are boxes (a nested open container is one box of its own laid-out size), its edges those between members.
   Identical shapes (the layers of a stack) are laid out once. */
OW.layoutBox = function (kids, edges) {
  var sig = kids.map(function (k) { return k.width + "x" + k.height; }).join(",") + "|" + edges.map(function (e) { return e[0] + ">" + e[1]; }).join(",");
  var hit = OW.layoutCache.get(sig);
  if (hit) return hit;
  var g = new dagre.graphlib.Graph({ multigraph: false });
  g.setGraph({ rankdir: "TB", ranker: kids.length <= 400 ? "network-simplex" : "tight-tree", nodesep: 24, ranksep: 36, edgesep: 10, marginx: 0, marginy: 0 });
  g.setDefaultEdgeLabel(function () { return {}; });
  kids.forEach(function (k, i) { g.setNode(String(i), { width: k.width, height: k.height }); });
  edges.forEach(function (e) { g.setEdge(String(e[0]), String(e[1]), { minlen: 1 }); });
  dagre.layout(g);
  var out = { pos: kids.map(function (_, i) { var n = g.node(String(i)); return [n.x, n.y]; }), points: {}, width: 0, height: 0 };
  edges.forEach(function (e) { out.points[e[0] + ">" + e[1]] = g.edge(String(e[0]), String(e[1])).points; });
  kids.forEach(function (k, i) {
    out.width = Math.max(out.width, out.pos[i][0] + k.width / 2); out.height = Math.max(out.height, out.pos[i][1] + k.height / 2);
  });
  if (OW.layoutCache.size > 5000) OW.layoutCache.clear();
  OW.layoutCache.set(sig, out);
  return out;
};

OW.SEGMENT = 40; // a container with more members is laid out in runs of this many, stacked (dagre's cost grows ~ranks x nodes)

/* Members in rank order (longest path from the sources, then their order in the graph), so runs follow the flow. */
OW.rankOrder = function (n, edges) {
  var outs = [], indeg = [], rank = [], queue = [], i;
  for (i = 0; i < n; i++) { outs.push([]); indeg.push(0); rank.push(0); }
  edges.forEach(function (e) { outs[e[0]].push(e[1]); indeg[e[1]]++; });
  for (i = 0; i < n; i++) if (!indeg[i]) queue.push(i);
  for (var q = 0; q < queue.length; q++) {
    var v = queue[q];
    outs[v].forEach(function (w) { rank[w] = Math.max(rank[w], rank[v] + 1); if (--indeg[w] === 0) queue.push(w); });
  }
  // members on a cycle (a module entered twice, seen from outside) keep the rank their placed inputs give them
  var order = [];
  for (i = 0; i < n; i++) order.push(i);
  return order.sort(function (x, y) { return rank[x] - rank[y] || x - y; });
};

/* A container's layout: dagre's when it is small, else runs of OW.SEGMENT members in rank order laid out by
   themselves and stacked, centred on one axis; an edge between runs is drawn straight. */
OW.layoutStack = function (kids, edges) {
  if (kids.length <= OW.SEGMENT) return OW.layoutBox(kids, edges);
  var order = OW.rankOrder(kids.length, edges), at = [], parts = [], width = 0, n = OW.SEGMENT;
  order.forEach(function (k, i) { at[k] = i; });
  for (var s = 0; s < order.length; s += n) {
    var inside = edges.filter(function (e) { return at[e[0]] >= s && at[e[0]] < s + n && at[e[1]] >= s && at[e[1]] < s + n; });
    var lay = OW.layoutBox(order.slice(s, s + n).map(function (k) { return kids[k]; }), inside.map(function (e) { return [at[e[0]] - s, at[e[1]] - s]; }));
    parts.push({ start: s, lay: lay, edges: inside });
    width = Math.max(width, lay.width);
  }
  var out = { pos: [], points: {}, width: width, height: 0 }, y = 0;
  parts.forEach(function (part) {
    var dx = (width - part.lay.width) / 2, s = part.start;
    part.lay.pos.forEach(function (p, i) { out.pos[order[s + i]] = [p[0] + dx, p[1] + y]; });
    part.edges.forEach(function (e) {
      out.points[e[0] + ">" + e[1]] = (part.lay.points[(at[e[0]] - s) + ">" + (at[e[1]] - s)] || []).map(function (q) { return { x: q.x + dx, y: q.y + y }; });
    });
    y += part.lay.height + 36;
  });
  out.height = y - 36;
  edges.forEach(function (e) { // between runs: from the bottom of one box to the top of the other
    var key = e[0] + ">" + e[1];
    if (out.points[key]) return;
    var a = out.pos[e[0]], b = out.pos[e[1]];
    out.points[key] = [{ x: a[0], y: a[1] + kids[e[0]].height / 2 }, { x: b[0], y: b[1] - kids[e[1]].height / 2 }];
  });
  return out;
};

OW.Scene.prototype.layout = function (built) {
  var items = built.items, parents = built.parents, P = OW.PAD, ROOT = "\u0000root";
  var kids = {}, depth = {};
  kids[ROOT] = [];
  function parentOf(id) { return parents[id] || ROOT; }
  function d(id) { if (id === ROOT) return 0; if (depth[id] === undefined) depth[id] = d(parentOf(id)) + 1; return depth[id]; }
  Object.keys(items).forEach(function (id) {
    var it = items[id];
    (kids[parentOf(id)] || (kids[parentOf(id)] = [])).push(id);
    if (it.kind === "cluster") { if (!kids[id]) kids[id] = []; } else OW.size(it);
  });
  // each edge belongs to the innermost container holding both ends; there it joins the members that hold them
  var local = {};
  Object.keys(built.edges).forEach(function (k) {
    var e = built.edges[k], chain = {}, x, y, below = null;
    for (x = e.v; ; x = parentOf(x)) { chain[x] = below; below = x; if (x === ROOT) break; }
    below = null;
    for (y = e.w; !(y in chain); y = parentOf(y)) below = y; // climb to the innermost common container
    e.rv = chain[y]; e.rw = below; e.points = [];
    if (e.rv === null || e.rw === null || e.rv === e.rw) return; // one end holds the other: nothing to draw
    (local[y] || (local[y] = [])).push(k);
  });
  var order = Object.keys(kids).sort(function (a, b) { return d(b) - d(a); }), boxes = {};
  order.forEach(function (c) {
    var members = kids[c], index = {};
    members.forEach(function (id, i) { index[id] = i; });
    var es = [], seen = {};
    (local[c] || []).forEach(function (k) {
      var e = built.edges[k], key = index[e.rv] + ">" + index[e.rw];
      if (!seen[key]) { seen[key] = 1; es.push([index[e.rv], index[e.rw]]); }
    });
    var lay = OW.layoutStack(members.map(function (id) { return items[id]; }), es);
    boxes[c] = lay;
    if (c !== ROOT) { var it = items[c]; it.width = Math.max(lay.width + 2 * P.side, 120); it.height = lay.height + P.head + P.bottom; }
  });
  // absolute positions, outermost first; an edge runs from its source box along its container's route to its target box
  function place(c, ox, oy) {
    var lay = boxes[c], index = {};
    kids[c].forEach(function (id, i) {
      var it = items[id];
      index[id] = i;
      it.x = ox + lay.pos[i][0]; it.y = oy + lay.pos[i][1];
      if (it.kind === "cluster") place(id, it.x - it.width / 2 + P.side, it.y - it.height / 2 + P.head);
    });
    (local[c] || []).forEach(function (k) {
      var e = built.edges[k], a = items[e.v], b = items[e.w];
      var pts = (lay.points[index[e.rv] + ">" + index[e.rw]] || []).map(function (q) { return { x: q.x + ox, y: q.y + oy }; });
      if (e.rv !== e.v) pts.unshift({ x: a.x, y: a.y + a.height / 2 });
      if (e.rw !== e.w) pts.push({ x: b.x, y: b.y - b.height / 2 });
      e.points = pts;
    });
  }
  place(ROOT, 20, 20);
  built.width = boxes[ROOT].width + 40; built.height = boxes[ROOT].height + 40; built.compound = true;
  return built;
};

/* The SVG of the laid-out scene; with `rect` ([x0, y0, x1, y1]) only what meets it, with `bare` boxes without text. */
OW.Scene.prototype.svg = function (built, findings, rect, bare) {
  var esc = OW.esc, out = [], items = built.items;
  function meets(x0, y0, x1, y1) { return !rect || (x1 >= rect[0] && x0 <= rect[2] && y1 >= rect[1] && y0 <= rect[3]); }
  var ids = Object.keys(items).filter(function (id) {
    var it = items[id];
    return it.width !== undefined && meets(it.x - it.width / 2, it.y - it.height / 2, it.x + it.width / 2, it.y + it.height / 2);
  });
  ids.forEach(function (id) { // clusters first, outermost (largest) underneath
    var it = items[id];
    if (it.kind !== "cluster" || !it.width) return;
    var x = it.x - it.width / 2, y = it.y - it.height / 2;
    var attr = it.group !== undefined ? ' data-group="' + it.group + '"' : ' data-hop="' + esc(it.hop || "") + '"';
    out.push('<g class="cluster' + (it.hop ? " hopc" : "") + '"' + attr + ' data-item="' + esc(id) + '"><rect x="' + x + '" y="' + y +
      '" width="' + it.width + '" height="' + it.height + '" rx="6"/>' + (bare ? "" : '<text class="chead" x="' + (x + 8) + '" y="' + (y + 14) + '">' +
      (it.group !== undefined || it.hop ? "\u25be " : "") + esc(it.label) + "</text>") + "</g>");
  });
  Object.keys(built.edges).forEach(function (k) {
    var e = built.edges[k], p = e.points || [];
    if (!p.length) return;
    if (rect) {
      var x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
      p.forEach(function (q) { x0 = Math.min(x0, q.x); y0 = Math.min(y0, q.y); x1 = Math.max(x1, q.x); y1 = Math.max(y1, q.y); });
      if (!meets(x0, y0, x1, y1)) return;
    }
    var d = "M" + p.map(function (q) { return q.x.toFixed(1) + "," + q.y.toFixed(1); }).join("L");
    var mid = p[Math.floor(p.length / 2)];
    out.push('<g class="edge"><path d="' + d + '" marker-end="url(#arrow)"/>' +
      (e.label && !bare ? '<text x="' + (mid.x + 4).toFixed(1) + '" y="' + (mid.y - 3).toFixed(1) + '">' + esc(e.label) + (e.n > 1 ? " ×" + e.n : "") + "</text>" : "") + "</g>");
  });
  ids.forEach(function (id) {
    var it = items[id];
    if (it.kind === "cluster") return;
    var x = it.x - it.width / 2, y = it.y - it.height / 2, cls = "node k-" + it.kind, attrs = ' data-item="' + esc(id) + '"';
    if (it.kind === "op" || it.kind === "hop") {
      attrs += ' data-node="' + esc(it.name) + '" data-scope="' + esc(it.scope) + '"';
      var f = findings ? findings(it.node, it.scope) : null;
      if (f) cls += " f-" + f;
    } else if (it.kind === "input") {
      attrs += ' data-input="' + esc(it.name) + '" data-scope="' + esc(it.scope) + '"'; cls += " c-" + it.cat.replace(/\s+/g, "-");
    } else if (it.kind === "group") attrs += ' data-group="' + it.group + '"';
    else if (it.kind === "unused") attrs += ' data-unused="1"';
    out.push('<g class="' + cls + '"' + attrs + ' transform="translate(' + x.toFixed(1) + "," + y.toFixed(1) + ')"><rect width="' + it.width +
      '" height="' + it.height + '" rx="' + (it.kind === "input" || it.kind === "output" ? 14 : 4) + '"/>' +
      (bare ? "" : '<text class="l1" x="8" y="15">' + esc(it.label) + '</text><text class="l2" x="8" y="30">' + esc(it.sub || "") + "</text>") +
      (it.kind === "hop" ? '<g class="toggle" data-toggle="' + esc(it.key) + '"><rect x="' + (it.width - 22) + '" y="4" width="18" height="18" rx="3"/><text x="' + (it.width - 17) + '" y="17">' + (this.state.hops.has(it.key) ? "\u2212" : "+") + "</text></g>" : "") +
      (it.kind === "group" ? '<text class="l3" x="' + (it.width - 16) + '" y="15">+</text>' : "") + "</g>");
  }, this);
  return '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0L10,5L0,10z"/></marker></defs>' + out.join("");
};
