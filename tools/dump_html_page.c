/* tools/dump_html_page.c — the style and script of `reprise dump --format
 * html` (dump_html.c inlines them, with d3 and the data). The script shows
 * one laid-out level at a time (the step's groups; a group's own groups or
 * ops when it is opened): pan and zoom (d3.behavior.zoom), search by name
 * (exact, then substring; Enter again for the next match), click a node to
 * highlight its ancestors and descendants, double-click a group to open
 * it (the crumbs go back), a critical-path toggle, op details on hover.
 * "#selftest=search:NAME;expand:GROUP;crit" runs those steps at load and
 * writes what it saw into <pre id="selftest"> (the browser test reads it
 * with chromium --dump-dom). Lines, each a string, NULL-terminated. */
#include "dump_view.h"

#include <stddef.h>

const char *const dv_page_css[] = {
    "body{margin:0;font:13px "
    "Helvetica,Arial,sans-serif;color:#222;display:flex;flex-direction:column;"
    "height:100vh}\n",
    "#bar{padding:6px 8px;background:#f4f6fa;border-bottom:1px solid "
    "#ccd;display:flex;gap:8px;align-items:center;flex-wrap:wrap}\n",
    "#crumbs a{color:#1f5fbf;cursor:pointer;text-decoration:underline}\n",
    "#stage{flex:1;position:relative;overflow:hidden}\n",
    "#stage svg{width:100%;height:100%;cursor:move}\n",
    "#tip{position:absolute;display:none;background:#fff;border:1px solid "
    "#99a;padding:6px 8px;max-width:520px;font:12px "
    "monospace;white-space:pre-wrap;pointer-events:none;box-shadow:2px 2px 6px "
    "rgba(0,0,0,.2);z-index:5}\n",
    "#info{color:#555}\n",
    "g.node{cursor:pointer}\n",
    /* the SVGs' defaults (dump_html_svg.c leaves them out of the SVGs) */
    "#stage text{text-anchor:middle;font-family:Helvetica,sans-Serif;"
    "font-size:10px}\n",
    ".node rect,.node path,.node polygon{fill:#eef3fb;stroke:#000}\n",
    ".node polyline,.edge path{fill:none;stroke:#000}\n",
    ".edge polygon{fill:#000;stroke:#000}\n",
    "g.node.grp polygon{fill:#dde8f7}\n",
    "g.node.sel rect,g.node.sel polygon,g.node.sel path{stroke:#000;"
    "stroke-width:3}\n",
    "g.node.anc rect,g.node.anc polygon,g.node.anc path{fill:#fde7c7}\n",
    "g.node.desc rect,g.node.desc polygon,g.node.desc path{fill:#d8f0d2}\n",
    "g.dim{opacity:.25}\n",
    "g.edge.hot path{stroke:#555;stroke-width:2}\n",
    "body.showcrit g.crit rect,body.showcrit g.crit polygon,body.showcrit "
    "g.crit path{stroke:#d62728;stroke-width:3}\n",
    "body.showcrit g.edge.crit polygon{fill:#d62728}\n",
    "g.node.found rect,g.node.found polygon,g.node.found "
    "path{stroke:#9b30ff;stroke-width:4}\n",
    "#selftest{display:none}\n",
    NULL,
};

const char *const dv_page_js[] = {
    "(function () {\n",
    "  \"use strict\";\n",
    "  var D = RP_DATA, SV = RP_SVG, cur = -1, zoom = null, svg = null, wrap = "
    "null;\n",
    "  var stage = document.getElementById(\"stage\"), tip = "
    "document.getElementById(\"tip\");\n",
    "  var matches = [], matchAt = 0;\n",
    "  function el(id) { return document.getElementById(id); }\n",
    "  function opName(i) { var o = D.ops[i]; return o[0] || (\"op \" + i); "
    "}\n",
    "  function nodeInfo(id) { return D.views[cur].nodes[id]; }\n",
    "  function crumbs(v) {\n",
    "    var path = [], c = el(\"crumbs\");\n",
    "    for (var k = v; k >= 0; k = D.views[k].parent) path.unshift(k);\n",
    "    c.innerHTML = \"\";\n",
    "    path.forEach(function (k, n) {\n",
    "      if (n) c.appendChild(document.createTextNode(\" / \"));\n",
    "      var a = document.createElement(\"a\");\n",
    "      a.textContent = D.views[k].key || \"step\";\n",
    "      a.onclick = function () { show(k); };\n",
    "      c.appendChild(a);\n",
    "    });\n",
    "  }\n",
    "  function fit() {\n",
    "    var g = wrap.node().getBBox(), w = stage.clientWidth || 800, h = "
    "stage.clientHeight || 600;\n",
    "    var s = Math.min(w / (g.width + 20), h / (g.height + 20), 1.5), tall "
    "= s < 0.3;\n",
    "    if (tall) s = Math.min(0.3, w / (g.width + 20));  /* long steps: the "
    "top, readable */\n",
    "    zoom.scale(s).translate([(w - g.width * s) / 2 - g.x * s,\n",
    "                             tall ? 10 - g.y * s : (h - g.height * s) / 2 "
    "- g.y * s]);\n",
    "    zoom.event(svg);\n",
    "  }\n",
    "  function show(v) {\n",
    "    cur = v;\n",
    "    stage.innerHTML = SV[v];\n",
    "    stage.appendChild(tip);\n",
    "    svg = d3.select(stage).select(\"svg\").attr(\"width\", "
    "null).attr(\"height\", null)\n",
    "      .attr(\"viewBox\", null);\n",
    "    var graph = svg.select(\"g.graph\");\n",
    "    wrap = svg.insert(\"g\", \"g.graph\").attr(\"class\", "
    "\"zoomwrap\");\n",
    "    wrap.node().appendChild(graph.node());\n",
    "    zoom = d3.behavior.zoom().scaleExtent([0.01, 8]).on(\"zoom\", "
    "function () {\n",
    "      wrap.attr(\"transform\", \"translate(\" + d3.event.translate + "
    "\")scale(\" + d3.event.scale + \")\");\n",
    "    });\n",
    "    svg.call(zoom).on(\"dblclick.zoom\", null);\n",
    "    svg.selectAll(\"g.node\").on(\"click\", select).on(\"dblclick\", "
    "expand)\n",
    "      .on(\"mousemove\", hover).on(\"mouseout\", function () { "
    "tip.style.display = \"none\"; });\n",
    "    svg.selectAll(\"title\").remove();\n",
    "    crumbs(v);\n",
    "    var n = Object.keys(D.views[v].nodes).length;\n",
    "    el(\"info\").textContent = n + \" nodes, \" + D.views[v].edges.length "
    "+ \" edges\" +\n",
    "      (D.views[v].key ? \" in \" + D.views[v].key : \"\") + \" "
    "(double-click a group to open it)\";\n",
    "    fit();\n",
    "  }\n",
    "  /* the view's nodes reached from start's ops along the graph's own\n",
    "   * edges (paths through ops outside the view count) */\n",
    "  function reach(start, fwd) {\n",
    "    if (!D.adj) {\n",
    "      D.adj = [{}, {}];\n",
    "      D.opedges.forEach(function (e) {\n",
    "        (D.adj[0][e[1]] = D.adj[0][e[1]] || []).push(e[0]);\n",
    "        (D.adj[1][e[0]] = D.adj[1][e[0]] || []).push(e[1]);\n",
    "      });\n",
    "    }\n",
    "    var adj = D.adj[fwd ? 1 : 0], nodes = D.views[cur].nodes, of = {},\n",
    "      seen = {}, out = {};\n",
    "    Object.keys(nodes).forEach(function (k) {\n",
    "      nodes[k][6].forEach(function (op) { of[op] = k; });\n",
    "    });\n",
    "    var stack = nodes[start] ? nodes[start][6].slice() : [];\n",
    "    stack.forEach(function (op) { seen[op] = 1; });\n",
    "    while (stack.length) {\n",
    "      (adj[stack.pop()] || []).forEach(function (w) {\n",
    "        if (seen[w]) return;\n",
    "        seen[w] = 1;\n",
    "        stack.push(w);\n",
    "        if (of[w] !== undefined && of[w] !== start) out[of[w]] = 1;\n",
    "      });\n",
    "    }\n",
    "    return out;\n",
    "  }\n",
    "  function highlight(id) {\n",
    "    var anc = reach(id, false), desc = reach(id, true);\n",
    "    svg.selectAll(\"g.node\").each(function () {\n",
    "      var s = d3.select(this), k = this.id;\n",
    "      s.classed(\"sel\", k === id).classed(\"anc\", "
    "!!anc[k]).classed(\"desc\", !!desc[k])\n",
    "        .classed(\"dim\", k !== id && !anc[k] && !desc[k]);\n",
    "    });\n",
    "    svg.selectAll(\"g.edge\").each(function () {\n",
    "      var e = D.views[cur].edges[+this.id.split(\"_\")[1]], on = e &&\n",
    "        ((anc[e[0]] || e[0] === id) && (anc[e[1]] || e[1] === id) ||\n",
    "         (desc[e[0]] || e[0] === id) && (desc[e[1]] || e[1] === id));\n",
    "      d3.select(this).classed(\"hot\", !!on).classed(\"dim\", !on);\n",
    "    });\n",
    "    return {anc: Object.keys(anc).length, desc: "
    "Object.keys(desc).length};\n",
    "  }\n",
    "  function select() { d3.event.stopPropagation(); highlight(this.id); }\n",
    "  function expand() {\n",
    "    var n = nodeInfo(this.id);\n",
    "    if (n && n[0] === \"g\") show(n[1]);\n",
    "  }\n",
    "  function rect(r) { return r; }\n",
    "  function details(id) {\n",
    "    var n = nodeInfo(id);\n",
    "    if (!n) return \"\";\n",
    "    if (n[0] === \"g\") {\n",
    "      var v = D.views[n[1]];\n",
    "      return \"group \" + v.key + \"\\n\" + n[2] + \" ops (\" + n[3] + \" "
    "tasks, \" + n[4] +\n",
    "        \" copies)\" + (n[7] > 1 ? \", \" + n[7] + \" shards\" : \"\") "
    "+\n",
    "        \"\\ndouble-click to open\" + (n[5] ? \"\\non the critical path\" "
    ": \"\");\n",
    "    }\n",
    "    var o = D.ops[n[1]], t = \"op \" + n[1] + \" \" + (o[0] ? \"'\" + "
    "o[0] + \"'\" : \"(unnamed)\") +\n",
    "      \"\\n\" + (o[2] === \"c\" ? \"copy\" : \"task \" + o[1]) + "
    "\"\\nprocessor \" + o[3] +\n",
    "      (o[4] > 1 ? \", \" + o[4] + \" shards\" : \"\") + (o[5] ? \"\\ncost "
    "\" + o[5] + \" ns\" : \"\") +\n",
    "      (o[6] ? \"\\narguments \" + (o[6].length / 2) + \" B: \" + "
    "o[6].slice(0, 64) +\n",
    "       (o[6].length > 64 ? \"...\" : \"\") : \"\") + \"\\naccesses:\";\n",
    "    o[7].forEach(function (a) {\n",
    "      var i = D.insts[a[0]] || [\"?\", \"?\", \"?\", \"?\"];\n",
    "      t += \"\\n  \" + a[1] + \" inst \" + a[0] + (i[0] ? \" '\" + i[0] + "
    "\"'\" : \"\") + \" \" + i[1] + \" \" +\n",
    "        rect(i[2]) + \" \" + i[3];\n",
    "    });\n",
    "    return t + (n[5] ? \"\\non the critical path\" : \"\");\n",
    "  }\n",
    "  function hover() {\n",
    "    var m = d3.mouse(stage);\n",
    "    tip.textContent = details(this.id);\n",
    "    tip.style.left = (m[0] + 14) + \"px\";\n",
    "    tip.style.top = (m[1] + 10) + \"px\";\n",
    "    tip.style.display = \"block\";\n",
    "  }\n",
    "  function center(id) {\n",
    "    var node = svg.select(\"#\" + id).node();\n",
    "    if (!node) return;\n",
    "    var b = node.getBBox(), g = "
    "svg.select(\"g.graph\").node().transform.baseVal.consolidate();\n",
    "    var tx = g ? g.matrix.e : 0, ty = g ? g.matrix.f : 0, s = "
    "Math.max(zoom.scale(), 0.8);\n",
    "    var w = stage.clientWidth || 800, h = stage.clientHeight || 600;\n",
    "    zoom.scale(s).translate([w / 2 - s * (b.x + b.width / 2 + tx), h / 2 "
    "- s * (b.y + b.height / 2 + ty)]);\n",
    "    zoom.event(svg);\n",
    "  }\n",
    "  function search(q) {\n",
    "    matches = [];\n",
    "    /* ops outside the page (--focus) have no view (-1) */\n",
    "    for (var i = 0; i < D.ops.length; i++) if (D.ops[i][8] >= 0 && "
    "D.ops[i][0] === q) matches.push(i);\n",
    "    if (!matches.length)\n",
    "      for (i = 0; i < D.ops.length; i++)\n",
    "        if (D.ops[i][8] >= 0 && opName(i).indexOf(q) >= 0) "
    "matches.push(i);\n",
    "    matchAt = 0;\n",
    "    el(\"found\").textContent = q ? matches.length + \" match\" + "
    "(matches.length === 1 ? \"\" : \"es\") : \"\";\n",
    "    return matches.length ? go(matches[0]) : null;\n",
    "  }\n",
    "  function go(i) {\n",
    "    var v = D.ops[i][8];\n",
    "    show(v);\n",
    "    var id = \"o\" + i;\n",
    "    svg.selectAll(\"g.node\").classed(\"found\", function () { return "
    "this.id === id; });\n",
    "    highlight(id);\n",
    "    center(id);\n",
    "    return {op: i, view: v, shown: !svg.select(\"#\" + id).empty()};\n",
    "  }\n",
    "  function toggleCrit(on) { d3.select(\"body\").classed(\"showcrit\", "
    "on); }\n",
    "  function opNodes(v) {\n",
    "    var n = D.views[v].nodes, k = 0;\n",
    "    for (var id in n) if (n[id][0] === \"o\") k++;\n",
    "    return k;\n",
    "  }\n",
    "  function findView(key) {\n",
    "    for (var v = 0; v < D.views.length; v++) if (D.views[v].key === key) "
    "return v;\n",
    "    return -1;\n",
    "  }\n",
    "  function selftest(spec) {\n",
    "    var out = [\"nodes \" + Object.keys(D.views[0].nodes).length, \"ops "
    "\" + D.ops.length,\n",
    "               \"views \" + D.views.length, \"critical \" + "
    "D.crit.length];\n",
    "    spec.split(\";\").forEach(function (step) {\n",
    "      var kv = step.split(\":\"), what = kv[0], arg = "
    "decodeURIComponent(kv.slice(1).join(\":\"));\n",
    "      if (what === \"search\") {\n",
    "        var r = search(arg);\n",
    "        out.push(r && r.shown ? \"search \" + arg + \": found op \" + "
    "r.op + \" '\" + opName(r.op) +\n",
    "          \"' in view '\" + (D.views[r.view].key || \"step\") + \"'\" : "
    "\"search \" + arg + \": not found\");\n",
    "      } else if (what === \"expand\") {\n",
    "        var v = findView(arg);\n",
    "        if (v < 0) { out.push(\"expand \" + arg + \": no such group\"); "
    "return; }\n",
    "        show(v);\n",
    "        out.push(\"expand \" + arg + \": \" + "
    "svg.selectAll(\"g.node\").size() + \" nodes, \" +\n",
    "          opNodes(v) + \" ops shown\");\n",
    "      } else if (what === \"select\") {\n",
    "        var i = -1;\n",
    "        for (var k = 0; k < D.ops.length; k++) if (D.ops[k][0] === arg) i "
    "= k;\n",
    "        if (i < 0 || svg.select(\"#o\" + i).empty()) { out.push(\"select "
    "\" + arg + \": not shown\"); return; }\n",
    "        var h = highlight(\"o\" + i);\n",
    "        out.push(\"select \" + arg + \": \" + h.anc + \" ancestors, \" + "
    "h.desc + \" descendants\");\n",
    "      } else if (what === \"hover\") {\n",
    "        var j = -1;\n",
    "        for (var q = 0; q < D.ops.length; q++) if (D.ops[q][0] === arg) j "
    "= q;\n",
    "        var nd = j < 0 ? null : svg.select(\"#o\" + j).node();\n",
    "        if (!nd) { out.push(\"hover \" + arg + \": not shown\"); return; "
    "}\n",
    "        var r = nd.getBoundingClientRect(), sr = "
    "stage.getBoundingClientRect();\n",
    "        tip.textContent = details(\"o\" + j);\n",
    "        tip.style.left = (r.right - sr.left + 8) + \"px\";\n",
    "        tip.style.top = (r.top - sr.top) + \"px\";\n",
    "        tip.style.display = \"block\";\n",
    "        out.push(\"hover \" + arg + \": \" + "
    "tip.textContent.split(\"\\n\").length + \" lines of details\");\n",
    "      } else if (what === \"crit\") {\n",
    "        toggleCrit(true);\n",
    "        el(\"crit\").checked = true;\n",
    "        out.push(\"crit: \" + svg.selectAll(\"g.crit\").size() + \" "
    "highlighted in view '\" +\n",
    "          (D.views[cur].key || \"step\") + \"'\");\n",
    "      }\n",
    "    });\n",
    "    var pre = el(\"selftest\");\n",
    "    pre.textContent = out.join(\"\\n\") + \"\\nselftest done\";\n",
    "  }\n",
    "  el(\"q\").onkeydown = function (e) {\n",
    "    if (e.key !== \"Enter\") return;\n",
    "    if (matches.length && this.value === this.dataset.last) {\n",
    "      matchAt = (matchAt + 1) % matches.length; go(matches[matchAt]);\n",
    "    } else { this.dataset.last = this.value; search(this.value); }\n",
    "  };\n",
    "  el(\"crit\").onchange = function () { toggleCrit(this.checked); };\n",
    "  el(\"fit\").onclick = function () { fit(); };\n",
    "  stage.onclick = function () {\n",
    "    svg.selectAll(\"g.node,g.edge\").classed(\"sel anc desc dim hot "
    "found\", false);\n",
    "  };\n",
    "  show(0);\n",
    "  var h = decodeURIComponent(location.hash || \"\");\n",
    "  if (h.indexOf(\"#selftest=\") === 0) selftest(h.slice(10));\n",
    "})();\n",
    NULL,
};
