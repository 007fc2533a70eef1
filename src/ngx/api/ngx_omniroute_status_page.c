
/*
 * Copyright (C) ngx_omniroute authors
 *
 * GET /status: one self-contained HTML page (CSS and script inline, no
 * external assets) that renders the breaker, cooldown, lockout, lease,
 * client key budget and fallback tables from the JSON API, and draws
 * (inline SVG, made by its own script) each provider's attempts per
 * second, share of failed attempts and latency over the last minutes and
 * each breaker's state over the same minutes, from GET
 * /api/monitoring/timeseries; it refreshes itself (SPEC §12).
 *
 * The page holds no state and is served without a token; its script reads
 * the API token from the URL fragment ("#token=...", never sent to the
 * server, so never in an access log) or a form, keeps it in the tab's
 * sessionStorage and sends it as a bearer token to the JSON endpoints,
 * which it finds next to the page (same prefix).  All data is inserted as
 * text (textContent) or SVG attributes, never as markup.  "#refresh=N"
 * sets the refresh period in seconds (default 5), "#window=N" the
 * minutes of the pictures in seconds (10..300, default 300).
 *
 * The Content-Security-Policy allows no inline script or style but these
 * two: their SHA-256 hashes, computed when the configuration is loaded.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include <openssl/evp.h>

#include "ngx_omniroute_api.h"


static ngx_int_t ngx_omniroute_status_hash(ngx_pool_t *pool, u_char *data,
    size_t len, ngx_str_t *out);


static u_char  ngx_omniroute_status_head[] =
    "<!DOCTYPE html>\n"
    "<html lang=\"en\">\n"
    "<head>\n"
    "<meta charset=\"utf-8\">\n"
    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
    "\n"
    "<meta name=\"referrer\" content=\"no-referrer\">\n"
    "<title>omniroute status</title>\n";


static u_char  ngx_omniroute_status_css[] =
    "body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222;"
    "\n"
    "       background: #fafafa; }\n"
    "h1 { font-size: 1.3em; margin: 0 0 .2em; }\n"
    "h2 { font-size: 1.05em; margin: 1.4em 0 .4em; }\n"
    "#meta { color: #666; font-size: .9em; }\n"
    "#err { color: #a00; font-weight: bold; min-height: 1.2em; }\n"
    "table { border-collapse: collapse; width: 100%; background: #fff; }\n"
    "th, td { text-align: left; padding: .25em .6em; border-bottom: 1px solid "
    "#ddd;\n"
    "         white-space: nowrap; }\n"
    "th { background: #eee; font-weight: 600; }\n"
    "td.num { text-align: right; font-variant-numeric: tabular-nums; }\n"
    ".badge { display: inline-block; padding: 0 .5em; border-radius: .6em;\n"
    "         font-size: .85em; font-weight: 600; color: #fff; background: #88"
    "8; }\n"
    ".CLOSED, .active { background: #2a7d2a; }\n"
    ".DEGRADED { background: #b08000; }\n"
    ".OPEN { background: #b00020; }\n"
    ".HALF_OPEN, .cooldown { background: #c06000; }\n"
    ".terminal { background: #5b1a8c; outline: 2px solid #e0c000; }\n"
    ".operator { color: #5b1a8c; font-weight: 600; }\n"
    ".empty td { color: #888; font-style: italic; }\n"
    "form { margin: 1em 0; }\n"
    "input { font: inherit; width: 24em; }\n"
    "svg.chart { display: block; }\n"
    "svg.chart .bg { fill: #f4f6f8; stroke: #dde; }\n"
    "svg.chart .line { fill: none; stroke-width: 1.5; }\n"
    "svg.chart.attempts .line { stroke: #1f6fb2; }\n"
    "svg.chart.errors .line { stroke: #b00020; }\n"
    "svg.chart.latency .line { stroke: #6a3fb5; }\n"
    "svg.chart.attempts .dot { fill: #1f6fb2; }\n"
    "svg.chart.errors .dot { fill: #b00020; }\n"
    "svg.chart.latency .dot { fill: #6a3fb5; }\n"
    "svg.chart text, svg.timeline text { font-size: 10px; fill: #555; }\n"
    "svg.timeline .seg { stroke: #fff; stroke-width: .5; }\n"
    "svg.timeline .CLOSED { fill: #2a7d2a; }\n"
    "svg.timeline .DEGRADED { fill: #b08000; }\n"
    "svg.timeline .OPEN { fill: #b00020; }\n"
    "svg.timeline .HALF_OPEN { fill: #c06000; }\n"
    "#svgns { position: absolute; width: 0; height: 0; }\n"
    ".legend span { margin-right: 1em; }\n";


static u_char  ngx_omniroute_status_body[] =
    "<h1>omniroute status</h1>\n"
    "<div id=\"meta\">loading&hellip;</div>\n"
    "<div id=\"err\"></div>\n"
    "<form id=\"login\" hidden>\n"
    "<label>API token <input id=\"token\" type=\"password\" autocomplete=\"off"
    "\"></label>\n"
    "<button type=\"submit\">Show</button>\n"
    "</form>\n"
    "<svg id=\"svgns\" aria-hidden=\"true\"></svg>\n"
    "<h2>Traffic, last <span id=\"window\">5 minutes</span></h2>\n"
    "<table id=\"traffic\"><thead><tr><th>provider</th><th>attempts per second"
    "</th>\n"
    "<th>failed attempts, %</th><th>latency, ms</th></tr></thead><tbody></tbod"
    "y>\n"
    "</table>\n"
    "<h2>Breaker timeline</h2>\n"
    "<table id=\"timeline\"><thead><tr><th>provider</th><th>now</th>\n"
    "<th>state over the same minutes</th></tr></thead><tbody></tbody></table>"
    "\n"
    "<div class=\"legend\"><span class=\"badge CLOSED\">CLOSED</span>\n"
    "<span class=\"badge DEGRADED\">DEGRADED</span><span class=\"badge OPEN\">"
    "OPEN</span>\n"
    "<span class=\"badge HALF_OPEN\">HALF_OPEN</span>\n"
    "<span class=\"badge terminal\">terminal: needs an operator</span></div>\n"
    "<h2>Providers</h2>\n"
    "<table id=\"providers\"><thead><tr><th>provider</th><th>kind</th>\n"
    "<th>breaker</th><th>failures</th><th>retry in</th><th>connections</th>\n"
    "<th>last failure</th></tr></thead><tbody></tbody></table>\n"
    "<h2>Connections</h2>\n"
    "<table id=\"connections\"><thead><tr><th>connection</th><th>provider</th>"
    "\n"
    "<th>state</th><th>remaining</th><th>backoff</th><th>failures</th>\n"
    "<th>last error</th></tr></thead><tbody></tbody></table>\n"
    "<h2>Model lockouts</h2>\n"
    "<table id=\"lockouts\"><thead><tr><th>provider</th><th>connection</th>\n"
    "<th>model</th><th>scope</th><th>reason</th><th>remaining</th></tr></thead"
    ">\n"
    "<tbody></tbody></table>\n"
    "<h2>Usage-limit lanes</h2>\n"
    "<table id=\"lanes\"><thead><tr><th>connection</th><th>lane</th>\n"
    "<th>slow header for</th><th>ended by</th><th>blocked for</th>\n"
    "<th>entries / waits</th><th>session-limit reset</th></tr></thead>"
    "<tbody></tbody></table>\n"
    "<h2>Exclusive leases</h2>\n"
    "<table id=\"leases\"><thead><tr><th>connection</th><th>client key</th>\n"
    "<th>generation</th><th>expires in</th></tr></thead><tbody></tbody>"
    "</table>\n"
    "<h2>Client key budgets</h2>\n"
    "<table id=\"budgets\"><thead><tr><th>client key</th><th>model</th>\n"
    "<th>requests/min</th><th>input tokens/min</th><th>output tokens/min"
    "</th>\n<th>tokens/day</th><th>tokens/month</th><th>in flight</th>"
    "<th>refused</th></tr></thead><tbody></tbody></table>\n"
    "<h2>Fallbacks</h2>\n"
    "<table id=\"fallbacks\"><thead><tr><th>reason</th><th>total</th>\n"
    "<th>since this page opened</th></tr></thead><tbody></tbody></table>\n";


static u_char  ngx_omniroute_status_js[] =
    "\"use strict\";\n"
    "(function () {\n"
    "  var base = location.pathname.replace(/\\/status\\/?$/, \"\");\n"
    "  var refresh = 5000, timer = null, first = null, skew = 0;\n"
    "  var hash = new URLSearchParams(location.hash.slice(1));\n"
    "  if (hash.get(\"token\")) {\n"
    "    sessionStorage.setItem(\"omniroute-token\", hash.get(\"token\"));\n"
    "    history.replaceState(null, \"\", location.pathname + location.search)"
    ";\n"
    "  }\n"
    "  if (hash.get(\"refresh\") && +hash.get(\"refresh\") >= 1) {\n"
    "    refresh = +hash.get(\"refresh\") * 1000;\n"
    "  }\n"
    "  var seconds = 300;\n"
    "  if (+hash.get(\"window\") >= 10 && +hash.get(\"window\") <= 300) {\n"
    "    seconds = Math.round(+hash.get(\"window\"));\n"
    "  }\n"
    "  function $(id) { return document.getElementById(id); }\n"
    "  function el(tag, text, cls) {\n"
    "    var e = document.createElement(tag);\n"
    "    if (text !== undefined && text !== null) { e.textContent = String(tex"
    "t); }\n"
    "    if (cls) { e.className = cls; }\n"
    "    return e;\n"
    "  }\n"
    "  function badge(text, cls) {\n"
    "    var b = el(\"span\", text, \"badge \" + (cls || text));\n"
    "    if (cls === \"terminal\") { b.title = \"needs an operator: terminal-r"
    "eset\"; }\n"
    "    return b;\n"
    "  }\n"
    "  function secs(ms) {\n"
    "    if (ms === null || ms === undefined || ms <= 0) { return \"-\"; }\n"
    "    var s = Math.ceil(ms / 1000);\n"
    "    if (s < 120) { return s + \"s\"; }\n"
    "    if (s < 7200) { return Math.floor(s / 60) + \"m \" + (s % 60) + \"s\""
    "; }\n"
    "    return Math.floor(s / 3600) + \"h \" + Math.floor(s % 3600 / 60) + \""
    "m\";\n"
    "  }\n"
    "  function until(t) {\n"
    "    return t ? secs(t - (Date.now() + skew)) : \"-\";\n"
    "  }\n"
    "  function ago(t) {\n"
    "    return t ? secs(Date.now() + skew - t) + \" ago\" : \"-\";\n"
    "  }\n"
    "  function row(cells, attrs) {\n"
    "    var tr = el(\"tr\");\n"
    "    cells.forEach(function (c) {\n"
    "      var td = el(\"td\");\n"
    "      if (c instanceof Node) { td.appendChild(c); }\n"
    "      else {\n"
    "        td.textContent = String(c);\n"
    "        if (typeof c === \"number\") { td.className = \"num\"; }\n"
    "      }\n"
    "      tr.appendChild(td);\n"
    "    });\n"
    "    Object.keys(attrs || {}).forEach(function (k) {\n"
    "      tr.setAttribute(\"data-\" + k, attrs[k]);\n"
    "    });\n"
    "    return tr;\n"
    "  }\n"
    "  function fill(id, rows, cols, none) {\n"
    "    var tb = $(id).tBodies[0];\n"
    "    tb.textContent = \"\";\n"
    "    if (rows.length === 0) {\n"
    "      var tr = el(\"tr\", null, \"empty\"), td = el(\"td\", none);\n"
    "      td.colSpan = cols;\n"
    "      tr.appendChild(td);\n"
    "      tb.appendChild(tr);\n"
    "    }\n"
    "    rows.forEach(function (r) { tb.appendChild(r); });\n"
    "  }\n"
    "  /* SVG, drawn here: the namespace is the inline <svg>'s */\n"
    "  var NS = $(\"svgns\").namespaceURI, W = 240, H = 40, TW = 480;\n"
    "  function svg(tag, attrs) {\n"
    "    var e = document.createElementNS(NS, tag);\n"
    "    Object.keys(attrs || {}).forEach(function (k) {\n"
    "      e.setAttribute(k, String(attrs[k]));\n"
    "    });\n"
    "    return e;\n"
    "  }\n"
    "  function num(v) {\n"
    "    if (v >= 100) { return String(Math.round(v)); }\n"
    "    return String(Math.round(v * 10) / 10);\n"
    "  }\n"
    "  function chart(kind, name, values, unit) {\n"
    "    var max = 0, sum = 0, seen = 0, n = values.length, d = \"\", pen = fa"
    "lse;\n"
    "    values.forEach(function (v) {\n"
    "      if (v === null) { return; }\n"
    "      seen++;\n"
    "      sum += v;\n"
    "      if (v > max) { max = v; }\n"
    "    });\n"
    "    var s = svg(\"svg\", { \"class\": \"chart \" + kind, width: W, height"
    ": H,\n"
    "                         viewBox: \"0 0 \" + W + \" \" + H, role: \"img\""
    ",\n"
    "                         \"data-chart\": kind, \"data-provider\": name,\n"
    "                         \"data-max\": num(max), \"data-sum\": num(sum),"
    "\n"
    "                         \"data-points\": seen });\n"
    "    s.appendChild(svg(\"rect\", { \"class\": \"bg\", x: 0.5, y: 0.5,\n"
    "                                width: W - 1, height: H - 1 }));\n"
    "    values.forEach(function (v, i) {\n"
    "      if (v === null) { pen = false; return; }\n"
    "      var x = n > 1 ? i * (W - 2) / (n - 1) + 1 : 1;\n"
    "      var y = H - 3 - (max > 0 ? v / max * (H - 16) : 0);\n"
    "      d += (pen ? \"L\" : \"M\") + x.toFixed(1) + \" \" + y.toFixed(1);\n"
    "      if (!pen && (i + 1 >= n || values[i + 1] === null)) {\n"
    "        /* a second alone between gaps: a dot */\n"
    "        s.appendChild(svg(\"circle\", { \"class\": \"dot\", cx: x.toFixed"
    "(1),\n"
    "                                      cy: y.toFixed(1), r: 1.8 }));\n"
    "      }\n"
    "      pen = true;\n"
    "    });\n"
    "    if (d) { s.appendChild(svg(\"path\", { \"class\": \"line\", d: d }));"
    " }\n"
    "    var t = svg(\"text\", { x: W - 4, y: 11, \"text-anchor\": \"end\" });"
    "\n"
    "    t.textContent = \"max \" + num(max) + unit;\n"
    "    s.appendChild(t);\n"
    "    var title = svg(\"title\");\n"
    "    title.textContent = name + \": \" + kind + \", \" + n + \" s\";\n"
    "    s.appendChild(title);\n"
    "    return s;\n"
    "  }\n"
    "  function timeline(name, state, list, now, span) {\n"
    "    var start = now - span, segs = [], t0 = start, at = state;\n"
    "    var inside = list.filter(function (x) { return x.time > start; });\n"
    "    if (inside.length) { at = inside[0].from; }\n"
    "    inside.forEach(function (x) {\n"
    "      segs.push([t0, x.time, at]);\n"
    "      t0 = x.time;\n"
    "      at = x.to;\n"
    "    });\n"
    "    segs.push([t0, now, state]);\n"
    "    var s = svg(\"svg\", { \"class\": \"timeline\", width: TW, height: 18"
    ",\n"
    "                         viewBox: \"0 0 \" + TW + \" 18\", role: \"img\","
    "\n"
    "                         \"data-chart\": \"breaker\", \"data-provider\": "
    "name,\n"
    "                         \"data-changes\": inside.length });\n"
    "    segs.forEach(function (g) {\n"
    "      var x = (g[0] - start) / span * TW;\n"
    "      var w = Math.max((g[1] - g[0]) / span * TW, 1);\n"
    "      var r = svg(\"rect\", { \"class\": \"seg \" + g[2], x: x.toFixed(1)"
    ", y: 1,\n"
    "                            width: w.toFixed(1), height: 16,\n"
    "                            \"data-state\": g[2] });\n"
    "      var title = svg(\"title\");\n"
    "      title.textContent = g[2] + \" from \" +\n"
    "        new Date(g[0]).toLocaleTimeString();\n"
    "      r.appendChild(title);\n"
    "      s.appendChild(r);\n"
    "    });\n"
    "    return s;\n"
    "  }\n"
    "  function pictures(h, ts) {\n"
    "    var span = ts.seconds * 1000, now = ts.time;\n"
    "    $(\"window\").textContent = ts.seconds >= 120 ?\n"
    "      Math.round(ts.seconds / 60) + \" minutes\" : ts.seconds + \" second"
    "s\";\n"
    "    fill(\"traffic\", Object.keys(ts.providers).map(function (name) {\n"
    "      var p = ts.providers[name];\n"
    "      var rate = p.attempts.map(function (a, i) {\n"
    "        return a ? 100 * p.errors[i] / a : null;\n"
    "      });\n"
    "      return row([name, chart(\"attempts\", name, p.attempts, \"/s\"),\n"
    "                  chart(\"errors\", name, rate, \"%\"),\n"
    "                  chart(\"latency\", name, p.latency_ms, \" ms\")],\n"
    "                 { traffic: name });\n"
    "    }), 4, \"no providers\");\n"
    "    fill(\"timeline\", Object.keys(ts.breakers).map(function (name) {\n"
    "      var state = h.providers[name] ? h.providers[name].state : \"CLOSED"
    "\";\n"
    "      return row([name, badge(state),\n"
    "                  timeline(name, state, ts.breakers[name], now, span)],\n"
    "                 { timeline: name });\n"
    "    }), 3, \"no providers\");\n"
    "  }\n"
    "  function get(path) {\n"
    "    var h = {};\n"
    "    var t = sessionStorage.getItem(\"omniroute-token\");\n"
    "    if (t) { h.Authorization = \"Bearer \" + t; }\n"
    "    return fetch(base + path, { headers: h, cache: \"no-store\",\n"
    "                                credentials: \"same-origin\" })\n"
    "      .then(function (r) {\n"
    "        if (r.status === 401) { throw { auth: true }; }\n"
    "        if (!r.ok) { throw new Error(path + \": HTTP \" + r.status); }\n"
    "        return r.json();\n"
    "      });\n"
    "  }\n"
    "  function budget(x, name) {\n"
    "    var v = x.limits[name];\n"
    "    var u = v.used + v.reserved + (v.others || 0);\n"
    "    return v.limit ? u + \" / \" + v.limit : String(u);\n"
    "  }\n"
    "  function render(h, c, l, ts, ls, bs) {\n"
    "    skew = h.time - Date.now();\n"
    "    pictures(h, ts);\n"
    "    fill(\"providers\", Object.keys(h.providers).map(function (name) {\n"
    "      var p = h.providers[name], k = p.connections;\n"
    "      var conns = el(\"span\", k.active + \" active, \" + k.cooldown +\n"
    "                     \" cooling, \" + k.terminal + \" terminal\",\n"
    "                     k.terminal ? \"operator\" : \"\");\n"
    "      return row([name, p.kind, badge(p.state), p.failures,\n"
    "                  secs(p.retry_after_ms), conns,\n"
    "                  p.last_reason ? p.last_reason + \", \" +\n"
    "                  ago(p.last_failure_at) : \"-\"],\n"
    "                 { provider: name, state: p.state });\n"
    "    }), 7, \"no providers\");\n"
    "    fill(\"connections\", c.connections.map(function (x) {\n"
    "      return row([x.id, x.provider, badge(x.terminal || x.status, x.statu"
    "s),\n"
    "                  x.terminal ? \"until reset\" : until(x.until),\n"
    "                  x.backoff_level, x.failures,\n"
    "                  x.last_error_type ? x.last_error_type +\n"
    "                  (x.last_status ? \" (\" + x.last_status + \")\" : \"\")"
    " : \"-\"],\n"
    "                 { connection: x.id, state: x.terminal || x.status });\n"
    "    }), 7, \"no connections\");\n"
    "    fill(\"lockouts\", l.lockouts.map(function (x) {\n"
    "      return row([x.provider, x.connection, x.model, x.scope, x.reason,\n"
    "                  until(x.expires_at)],\n"
    "                 { connection: x.connection, model: x.model });\n"
    "    }), 6, \"no active lockouts\");\n"
    "    fill(\"lanes\", c.connections.filter(function (x) {\n"
    "      return x.lane;\n"
    "    }).map(function (x) {\n"
    "      var n = x.lane, rs = n.reset;\n"
    "      return row([x.id, badge(n.phase), until(n.until), n.end || \"-\",\n"
    "                  until(n.blocked_until), n.entries + \" / \" + n.waits,\n"
    "                  rs.enabled ? (rs.result || \"not tried\") +\n"
    "                  (rs.next_at ? \", next \" + until(rs.next_at) : \"\")\n"
    "                  : \"off\"], { connection: x.id, lane: n.phase });\n"
    "    }), 7, \"no connection with usage_lane=on\");\n"
    "    fill(\"leases\", (ls.leases || []).map(function (x) {\n"
    "      return row([x.connection, x.key, x.generation,\n"
    "                  until(x.expires_at)], { connection: x.connection });\n"
    "    }), 4, \"no active leases\");\n"
    "    fill(\"budgets\", (bs.budgets || []).map(function (x) {\n"
    "      var n = 0;\n"
    "      Object.keys(x.refused).forEach(function (k) { n += x.refused[k]; "
    "});\n"
    "      return row([x.key, x.model || \"-\", budget(x, \"requests_per_min"
    "ute\"),\n"
    "                  budget(x, \"input_tokens_per_minute\"),\n"
    "                  budget(x, \"output_tokens_per_minute\"),\n"
    "                  budget(x, \"tokens_per_day\"),\n"
    "                  budget(x, \"tokens_per_month\"), x.in_flight, n],\n"
    "                 { key: x.key });\n"
    "    }), 9, \"no client keys\");\n"
    "    var fb = h.stats.fallbacks;\n"
    "    if (first === null) { first = fb; }\n"
    "    fill(\"fallbacks\", Object.keys(fb).filter(function (k) {\n"
    "      return fb[k] > 0;\n"
    "    }).map(function (k) {\n"
    "      return row([k, fb[k], fb[k] - (first[k] || 0)], { reason: k });\n"
    "    }), 3, \"no fallbacks yet\");\n"
    "    $(\"meta\").textContent = \"status \" + h.status + \", Redis \" +\n"
    "      (h.redis ? h.redis.state : \"-\") + \", updated \" +\n"
    "      new Date(h.time).toLocaleTimeString() + \", refreshing every \" +\n"
    "      refresh / 1000 + \"s\";\n"
    "  }\n"
    "  function load() {\n"
    "    clearTimeout(timer);\n"
    "    Promise.all([get(\"/api/monitoring/health\"),\n"
    "                 get(\"/api/resilience/cooldowns\"),\n"
    "                 get(\"/api/resilience/model-cooldowns\"),\n"
    "                 get(\"/api/monitoring/timeseries?seconds=\" + seconds),\n"
    "                 get(\"/api/resilience/leases\"),\n"
    "                 get(\"/api/keys/budgets\")])\n"
    "      .then(function (v) {\n"
    "        $(\"err\").textContent = \"\";\n"
    "        $(\"login\").hidden = true;\n"
    "        render(v[0], v[1], v[2], v[3], v[4], v[5]);\n"
    "        document.body.setAttribute(\"data-loaded\", \"1\");\n"
    "        timer = setTimeout(load, refresh);\n"
    "      })\n"
    "      .catch(function (e) {\n"
    "        if (e && e.auth) {\n"
    "          $(\"err\").textContent = \"a valid API token is needed\";\n"
    "          $(\"login\").hidden = false;\n"
    "          return;\n"
    "        }\n"
    "        $(\"err\").textContent = String(e && e.message || e);\n"
    "        timer = setTimeout(load, refresh);\n"
    "      });\n"
    "  }\n"
    "  $(\"login\").addEventListener(\"submit\", function (ev) {\n"
    "    ev.preventDefault();\n"
    "    sessionStorage.setItem(\"omniroute-token\", $(\"token\").value.trim()"
    ");\n"
    "    $(\"token\").value = \"\";\n"
    "    load();\n"
    "  });\n"
    "  load();\n"
    "})();\n";


/*
 * The page and its policy, put together once per process (they do not
 * depend on the configuration) in memory that lives as long as it: a
 * configuration pool could go with a failed reload, and a worker the
 * master starts afterwards would inherit dangling pointers.
 */
static ngx_str_t  ngx_omniroute_status_page;
static ngx_str_t  ngx_omniroute_status_csp;

static ngx_str_t  ngx_omniroute_status_deny = ngx_string("DENY");
static ngx_str_t  ngx_omniroute_status_referrer = ngx_string("no-referrer");


ngx_int_t
ngx_omniroute_status_page_init(ngx_conf_t *cf)
{
    u_char     *p;
    size_t      len;
    ngx_str_t   script, style;

    if (ngx_omniroute_status_csp.len) {
        /* set last: both are there */
        return NGX_OK;
    }

    if (ngx_omniroute_status_hash(cf->pool, ngx_omniroute_status_js,
                                  sizeof(ngx_omniroute_status_js) - 1,
                                  &script)
        != NGX_OK
        || ngx_omniroute_status_hash(cf->pool, ngx_omniroute_status_css,
                                     sizeof(ngx_omniroute_status_css) - 1,
                                     &style)
           != NGX_OK)
    {
        return NGX_ERROR;
    }

    len = sizeof(ngx_omniroute_status_head) - 1
          + sizeof("<style>") - 1 + sizeof(ngx_omniroute_status_css) - 1
          + sizeof("</style>\n</head>\n<body>\n") - 1
          + sizeof(ngx_omniroute_status_body) - 1
          + sizeof("<script>") - 1 + sizeof(ngx_omniroute_status_js) - 1
          + sizeof("</script>\n</body>\n</html>\n") - 1;

    p = ngx_alloc(len, cf->log);
    if (p == NULL) {
        return NGX_ERROR;
    }

    ngx_omniroute_status_page.data = p;

    p = ngx_cpymem(p, ngx_omniroute_status_head,
                   sizeof(ngx_omniroute_status_head) - 1);
    p = ngx_cpymem(p, "<style>", sizeof("<style>") - 1);
    p = ngx_cpymem(p, ngx_omniroute_status_css,
                   sizeof(ngx_omniroute_status_css) - 1);
    p = ngx_cpymem(p, "</style>\n</head>\n<body>\n",
                   sizeof("</style>\n</head>\n<body>\n") - 1);
    p = ngx_cpymem(p, ngx_omniroute_status_body,
                   sizeof(ngx_omniroute_status_body) - 1);
    p = ngx_cpymem(p, "<script>", sizeof("<script>") - 1);
    p = ngx_cpymem(p, ngx_omniroute_status_js,
                   sizeof(ngx_omniroute_status_js) - 1);
    p = ngx_cpymem(p, "</script>\n</body>\n</html>\n",
                   sizeof("</script>\n</body>\n</html>\n") - 1);

    ngx_omniroute_status_page.len = p - ngx_omniroute_status_page.data;

    len = sizeof("default-src 'none'; script-src 'sha256-'; "
                 "style-src 'sha256-'; connect-src 'self'; "
                 "base-uri 'none'; form-action 'none'; "
                 "frame-ancestors 'none'") - 1 + script.len + style.len;

    p = ngx_alloc(len, cf->log);
    if (p == NULL) {
        return NGX_ERROR;
    }

    ngx_omniroute_status_csp.data = p;
    ngx_omniroute_status_csp.len =
        ngx_sprintf(p, "default-src 'none'; script-src 'sha256-%V'; "
                    "style-src 'sha256-%V'; connect-src 'self'; "
                    "base-uri 'none'; form-action 'none'; "
                    "frame-ancestors 'none'", &script, &style)
        - p;

    return NGX_OK;
}


/* base64 of the SHA-256 of an inline script or style, for the CSP */

static ngx_int_t
ngx_omniroute_status_hash(ngx_pool_t *pool, u_char *data, size_t len,
    ngx_str_t *out)
{
    u_char        md[32];
    ngx_str_t     src;
    unsigned int  mdlen;

    mdlen = sizeof(md);

    if (EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL) != 1
        || mdlen != sizeof(md))
    {
        return NGX_ERROR;
    }

    out->data = ngx_pnalloc(pool, ngx_base64_encoded_length(sizeof(md)));
    if (out->data == NULL) {
        return NGX_ERROR;
    }

    src.data = md;
    src.len = sizeof(md);

    ngx_encode_base64(out, &src);

    return NGX_OK;
}


ngx_int_t
ngx_omniroute_api_status_page(ngx_omniroute_api_call_t *call)
{
    if (ngx_omniroute_api_add_header(call->r, "Content-Security-Policy",
                                     &ngx_omniroute_status_csp)
        != NGX_OK
        || ngx_omniroute_api_add_header(call->r, "X-Frame-Options",
                                        &ngx_omniroute_status_deny)
           != NGX_OK
        || ngx_omniroute_api_add_header(call->r, "Referrer-Policy",
                                        &ngx_omniroute_status_referrer)
           != NGX_OK)
    {
        return NGX_ERROR;
    }

    call->no_redact = 1;

    return ngx_omniroute_api_text(call, ngx_omniroute_status_page.data,
                                  ngx_omniroute_status_page.len,
                                  "text/html; charset=utf-8");
}
