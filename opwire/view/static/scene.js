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
        add(gid, { kind: "group", group: h, label: groups[h].path, sub: groups[h].type + " · " + self.idx.groupSize[h] + " nodes" },
          p >= 0 ? placeGroup(p) : null);
      }
      return gid;
    }
    add(id, item, g >= 0 ? placeGroup(g) : null);
    return id;
  }
  function scopeItems(scope, parent) {
    var graph = self.idx.scopes[scope].graph, top = scope === "", made = {};
    graph.inputs.forEach(function (inp) {
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

OW.COMPOUND_MAX = 220; // up to this many boxes dagre lays clusters out as compound nodes (it is slow past that)
OW.MAX_VISIBLE = 1500; // dagre's recursion and time grow past this: the page refuses to open more at once

OW.Scene.prototype.count = function (built) {
  var n = 0;
  for (var id in built.items) if (built.items[id].kind !== "cluster") n++;
  return n;
};

OW.Scene.prototype.layout = function (built) {
  var compound = this.count(built) <= OW.COMPOUND_MAX;
  var g = new dagre.graphlib.Graph({ compound: compound, multigraph: false });
  g.setGraph({ rankdir: "TB", ranker: compound ? "network-simplex" : "tight-tree", nodesep: 24, ranksep: 36, edgesep: 10, marginx: 20, marginy: 20 });
  g.setDefaultEdgeLabel(function () { return {}; });
  Object.keys(built.items).forEach(function (id) {
    var it = built.items[id];
    if (it.kind === "cluster") { if (compound) g.setNode(id, {}); return; }
    var chars = Math.max(String(it.label).length, String(it.sub || "").length * 0.9);
    it.width = Math.min(360, Math.max(90, chars * 7.2 + 24));
    it.height = it.kind === "group" ? 44 : 38;
    g.setNode(id, { width: it.width, height: it.height });
  });
  if (compound) Object.keys(built.parents).forEach(function (id) { g.setParent(id, built.parents[id]); });
  Object.keys(built.edges).forEach(function (k) { var e = built.edges[k]; g.setEdge(e.v, e.w, { minlen: 1 }); });
  dagre.layout(g);
  Object.keys(built.items).forEach(function (id) {
    var it = built.items[id];
    if (it.kind === "cluster" && !compound) return;
    var n = g.node(id); it.x = n.x; it.y = n.y;
    if (it.kind === "cluster") { it.width = n.width; it.height = n.height; }
  });
  if (!compound) this.boxes(built);
  Object.keys(built.edges).forEach(function (k) { var e = built.edges[k]; e.points = g.edge(e.v, e.w).points; });
  var gr = g.graph();
  built.width = gr.width || 0; built.height = gr.height || 0; built.compound = compound;
  return built;
};

/* Without compound layout, a cluster is drawn around its members (innermost clusters first). */
OW.Scene.prototype.boxes = function (built) {
  var items = built.items, parents = built.parents, depth = {}, box = {};
  function d(id) { if (depth[id] === undefined) depth[id] = parents[id] ? d(parents[id]) + 1 : 0; return depth[id]; }
  function grow(id, x0, y0, x1, y1) {
    var b = box[id] || (box[id] = [Infinity, Infinity, -Infinity, -Infinity]);
    b[0] = Math.min(b[0], x0); b[1] = Math.min(b[1], y0); b[2] = Math.max(b[2], x1); b[3] = Math.max(b[3], y1);
  }
  Object.keys(items).forEach(function (id) {
    var it = items[id];
    if (it.kind !== "cluster" && parents[id]) grow(parents[id], it.x - it.width / 2, it.y - it.height / 2, it.x + it.width / 2, it.y + it.height / 2);
  });
  Object.keys(items).filter(function (id) { return items[id].kind === "cluster"; })
    .sort(function (a, b) { return d(b) - d(a); })
    .forEach(function (id) {
      var b = box[id], it = items[id];
      if (!b) { it.x = it.y = it.width = it.height = 0; return; }
      var x0 = b[0] - 8, y0 = b[1] - 20, x1 = b[2] + 8, y1 = b[3] + 8;
      it.x = (x0 + x1) / 2; it.y = (y0 + y1) / 2; it.width = x1 - x0; it.height = y1 - y0;
      if (parents[id]) grow(parents[id], x0, y0, x1, y1);
    });
};

OW.Scene.prototype.svg = function (built, findings) {
  var esc = OW.esc, out = [], items = built.items;
  var ids = Object.keys(items);
  ids.forEach(function (id) { // clusters first, outermost (largest) underneath
    var it = items[id];
    if (it.kind !== "cluster" || !it.width) return;
    var x = it.x - it.width / 2, y = it.y - it.height / 2;
    var attr = it.group !== undefined ? ' data-group="' + it.group + '"' : ' data-hop="' + esc(it.hop || "") + '"';
    out.push('<g class="cluster' + (it.hop ? " hopc" : "") + '"' + attr + ' data-item="' + esc(id) + '"><rect x="' + x + '" y="' + y +
      '" width="' + it.width + '" height="' + it.height + '" rx="6"/><text class="chead" x="' + (x + 8) + '" y="' + (y + 14) + '">' +
      (it.group !== undefined || it.hop ? "\u25be " : "") + esc(it.label) + "</text></g>");
  });
  Object.keys(built.edges).forEach(function (k) {
    var e = built.edges[k], p = e.points || [];
    if (!p.length) return;
    var d = "M" + p.map(function (q) { return q.x.toFixed(1) + "," + q.y.toFixed(1); }).join("L");
    var mid = p[Math.floor(p.length / 2)];
    out.push('<g class="edge"><path d="' + d + '" marker-end="url(#arrow)"/>' +
      (e.label ? '<text x="' + (mid.x + 4).toFixed(1) + '" y="' + (mid.y - 3).toFixed(1) + '">' + esc(e.label) + (e.n > 1 ? " ×" + e.n : "") + "</text>" : "") + "</g>");
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
    out.push('<g class="' + cls + '"' + attrs + ' transform="translate(' + x.toFixed(1) + "," + y.toFixed(1) + ')"><rect width="' + it.width +
      '" height="' + it.height + '" rx="' + (it.kind === "input" || it.kind === "output" ? 14 : 4) + '"/>' +
      '<text class="l1" x="8" y="15">' + esc(it.label) + '</text><text class="l2" x="8" y="30">' + esc(it.sub || "") + "</text>" +
      (it.kind === "hop" ? '<g class="toggle" data-toggle="' + esc(it.key) + '"><rect x="' + (it.width - 22) + '" y="4" width="18" height="18" rx="3"/><text x="' + (it.width - 17) + '" y="17">' + (this.state.hops.has(it.key) ? "\u2212" : "+") + "</text></g>" : "") +
      (it.kind === "group" ? '<text class="l3" x="' + (it.width - 16) + '" y="15">+</text>' : "") + "</g>");
  }, this);
  return '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0L10,5L0,10z"/></marker></defs>' + out.join("");
};
