/* opwire view: the side panel (program summary, a node's target, arguments, outputs' tensor metadata,
   source location and findings; search results). */
"use strict";
var OW = window.OW || (window.OW = {});

OW.META_FIELDS = ["dtype", "shape", "strides", "storage offset", "device", "layout", "requires grad"];

OW.Panel = function (el, data, idx, findings) {
  this.el = el; this.data = data; this.idx = idx; this.findings = findings;
};

OW.Panel.prototype.link = function (key, text) {
  return '<a href="#" data-goto="' + OW.esc(key) + '">' + OW.esc(text) + "</a>";
};

/* "local", "inherited" or "inherited from rank N" -> the kind its colour shows ("local" or "inherited") */
OW.originKind = function (origin) { return origin.indexOf("inherited") === 0 ? "inherited" : "local"; };

/* What the two colours of differing nodes mean (shown when the findings label any difference). */
OW.legend = function (findings) {
  var any = false;
  ["nodes", "targets"].forEach(function (k) {
    Object.keys(findings[k]).forEach(function (n) { findings[k][n].forEach(function (e) { if (e.origin) any = true; }); });
  });
  if (!any) return "";
  return '<div class="legend"><span class="sw o-local"></span> local: the node itself computes differently' +
    ' (none of the inputs the saved run holds differed) <br><span class="sw o-inherited"></span> inherited: it received' +
    " an input that already differed</div>";
};

OW.Panel.prototype.findingList = function (list) {
  var esc = OW.esc;
  return list.map(function (f) {
    var origin = f.origin ? " o-" + OW.originKind(f.origin) : "";
    return '<div class="finding s-' + f.severity + origin + '"><b>' + esc(f.severity) + (f.code ? " " + esc(f.code) : "") +
      (f.origin ? " (" + esc(f.origin) + ")" : "") + "</b> " + esc(f.message) +
      (f.fix ? '<div class="fix">fix: ' + esc(f.fix) + "</div>" : "") + (f.detail ? "<pre>" + esc(f.detail) + "</pre>" : "") + "</div>";
  }).join("");
};

OW.Panel.prototype.summary = function () {
  var d = this.data, esc = OW.esc, self = this, g = d.graph, html = [];
  html.push("<h2>" + esc(d.kind === "extern" ? "extern-node file" : "exported program") + "</h2>");
  html.push('<p class="dim">' + g.nodes.length + " nodes" + (d.schema ? " · schema " + esc(d.schema) : "") + (d.torch ? " · torch " + esc(d.torch) : "") + "</p>");
  var ranges = Object.keys(d.ranges || {});
  if (ranges.length) {
    html.push("<h3>symbolic dims</h3><table>" + ranges.map(function (k) {
      return "<tr><td>" + esc(k) + "</td><td>" + esc(d.ranges[k][0]) + " .. " + esc(d.ranges[k][1]) + "</td></tr>";
    }).join("") + "</table>");
  }
  var cats = {};
  g.inputs.forEach(function (i) { (cats[i.kind] = cats[i.kind] || []).push(i); });
  ["user input", "parameter", "buffer", "constant", "token", "extern input", "input"].forEach(function (k) {
    var list = cats[k];
    if (!list) return;
    html.push("<details" + (list.length <= 20 ? " open" : "") + '><summary><h3 class="cat c-' + k.replace(/\s+/g, "-") + '">' + esc(k) + "s (" + list.length + ")</h3></summary><table>" + list.map(function (i) {
      var meta = g.values[i.name];
      return "<tr><td>" + self.link("|i|" + i.name, i.name) + "</td><td>" + esc(i.target) + "</td><td>" + esc(meta ? meta[0] : "") + "</td></tr>";
    }).join("") + "</table></details>");
  });
  html.push("<h3>outputs (" + g.outputs.length + ")</h3><table>" + g.outputs.map(function (o) {
    return "<tr><td>" + esc(o.text) + "</td><td>" + esc(o.kind) + "</td></tr>";
  }).join("") + "</table>");
  var f = this.findings;
  if (f) {
    html.push("<h3>findings: " + esc(f.title) + " (" + f.count + ")</h3>");
    if (f.first) html.push("<p>first divergence: " + this.link("|n|" + f.first, f.first) + "</p>");
    html.push(OW.legend(f));
    var rows = [];
    Object.keys(f.nodes).forEach(function (n) {
      f.nodes[n].forEach(function (e) {
        if (e.severity === "ok") return;
        var origin = e.origin ? " o-" + OW.originKind(e.origin) : "";
        rows.push("<tr class=\"s-" + e.severity + origin + "\"><td>" + self.link("|n|" + n, n) + "</td><td>" + esc(e.severity) +
          (e.origin ? ", " + esc(e.origin) : "") + "</td><td>" + esc(e.message) + "</td></tr>");
      });
    });
    Object.keys(f.targets).forEach(function (t) {
      f.targets[t].forEach(function (e) { rows.push("<tr class=\"s-" + e.severity + "\"><td>" + esc(t) + "</td><td>" + esc(e.severity) + "</td><td>" + esc(e.message) + "</td></tr>"); });
    });
    html.push(rows.length ? "<table class=\"findings\">" + rows.slice(0, 500).join("") + "</table>" : "<p>every node matches</p>");
  }
  html.push('<p class="dim keys">keys: + / − zoom · arrows pan · 0 fit · H inputs · / search · Enter next match · E expand all · C collapse · F first divergence · Esc back</p>');
  this.el.innerHTML = html.join("");
};

OW.Panel.prototype.node = function (key, findingsFor) {
  var rec = this.idx.nodes[key];
  if (!rec) return this.summary();
  var n = rec.node, esc = OW.esc, self = this, graph = this.idx.scopes[rec.scope].graph, html = [];
  html.push('<p><a href="#" data-back="1">\u2190 program</a></p>');
  html.push("<h2>" + esc(n.n) + "</h2><p class=\"target\">" + esc(n.tf) + "</p>");
  if (rec.scope) html.push('<p class="dim">in subgraph ' + esc(rec.scope.split("|n|").join(" › ")) + "</p>");
  var chain = [];
  for (var g = n.g; g >= 0; g = this.data.groups[g].parent) chain.unshift(this.data.groups[g].path + " (" + this.data.groups[g].type + ")");
  if (chain.length) html.push('<p class="dim">module: ' + esc(chain.join(" › ")) + "</p>");
  var f = findingsFor(n, rec.scope, true);
  if (f.length) html.push("<h3>findings</h3>" + this.findingList(f));
  if (n.sub.length) {
    html.push("<h3>subgraphs</h3><p><button data-toggle=\"" + esc(key) + "\">open / close in place</button></p><ul>" +
      n.sub.map(function (s) { return "<li>" + esc(s.arg) + ": " + esc(s.name) + " (" + s.graph.nodes.length + " nodes)</li>"; }).join("") + "</ul>");
  }
  html.push("<h3>arguments</h3><table>" + n.a.map(function (a) {
    return "<tr><td>" + esc(a[0]) + "</td><td><code>" + esc(a[1]) + "</code></td></tr>";
  }).join("") + "</table>");
  html.push("<h3>outputs</h3>");
  n.o.forEach(function (o) {
    var meta = graph.values[o];
    html.push("<p><code>%" + esc(o) + "</code> " + esc(meta ? meta[0] : "") + "</p>");
    if (meta && meta.length > 1) {
      html.push("<table class=\"meta\">" + OW.META_FIELDS.map(function (k, i) { return "<tr><td>" + k + "</td><td>" + esc(meta[i + 1]) + "</td></tr>"; }).join("") + "</table>");
    }
  });
  n.oc.forEach(function (c) { html.push("<p>constant output <code>" + esc(c) + "</code></p>"); });
  var users = graph.nodes.filter(function (m) { return n.o.some(function (o) { return m.in.indexOf(o) >= 0; }); });
  if (users.length) html.push("<h3>used by</h3><p>" + users.map(function (m) { return self.link(rec.scope + "|n|" + m.n, m.n); }).join(", ") + "</p>");
  html.push("<h3>source</h3>");
  if (n.fn) html.push("<p class=\"dim\">" + esc(n.fn) + "</p>");
  html.push(n.st >= 0 ? "<pre class=\"src\">" + esc(this.data.strings[n.st]) + "</pre>" : "<p class=\"dim\">no stack_trace metadata</p>");
  this.el.innerHTML = html.join("");
};

OW.Panel.prototype.unused = function () {
  var self = this, esc = OW.esc, list = this.data.graph.inputs.filter(function (i) { return i.unused; });
  this.el.innerHTML = '<p><a href="#" data-back="1">\u2190 program</a></p><h3>' + list.length + " inputs nothing reads</h3>" +
    '<p class="dim">bound by the signature but read by no node and no output (e.g. num_batches_tracked of a model in eval mode)</p><table>' +
    list.map(function (i) {
      var meta = self.data.graph.values[i.name];
      return "<tr><td>" + esc(i.name) + "</td><td>" + esc(i.kind) + " " + esc(i.target) + "</td><td>" + esc(meta ? meta[0] : "") + "</td></tr>";
    }).join("") + "</table>";
};

OW.Panel.prototype.results = function (query, hits) {
  var self = this, esc = OW.esc;
  var html = ['<p><a href="#" data-back="1">\u2190 program</a></p><h3>' + hits.length + " matches for \u201c" + esc(query) + "\u201d</h3><table>"];
  hits.slice(0, 300).forEach(function (k) {
    var rec = self.idx.nodes[k];
    html.push("<tr><td>" + self.link(k, rec.node.n) + "</td><td>" + esc(rec.node.t) + "</td><td class=\"dim\">" + esc(rec.scope ? "subgraph" : "") + "</td></tr>");
  });
  this.el.innerHTML = html.join("") + "</table>";
};
