
/*
 * Copyright (C) ngx_omniroute authors
 *
 * GET /status: one self-contained HTML page (inline CSS and script, no
 * external assets) that renders the breaker, cooldown, lockout and
 * fallback tables from the JSON API and refreshes itself (SPEC §12).
 *
 * The page holds no state and is served without a token; its script reads
 * the API token from the URL fragment ("#token=...", never sent to the
 * server, so never in an access log) or a form, keeps it in the tab's
 * sessionStorage and sends it as a bearer token to the JSON endpoints,
 * which it finds next to the page (same prefix).  All data is inserted as
 * text (textContent), never as markup.  "#refresh=N" sets the refresh
 * period in seconds (default 5).
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_omniroute_api.h"




static u_char  ngx_omniroute_status_html[] =
    "<!DOCTYPE html>\n"
    "<html lang=\"en\">\n"
    "<head>\n"
    "<meta charset=\"utf-8\">\n"
    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
    "\n"
    "<meta name=\"referrer\" content=\"no-referrer\">\n"
    "<title>omniroute status</title>\n"
    "<style>\n"
    "body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222;"
    "\n"
    "       background: #fafafa; }\n"
    "h1 { font-size: 1.3em; margin: 0 0 .2em; }\n"
    "h2 { font-size: 1.05em; margin: 1.4em 0 .4em; }\n"
    "#meta { color: #666; font-size: .9em; }\n"
    "#err { color: #a00; font-weight: bold; min-height: 1.2em; }\n"
    "table { border-collapse: collapse; width: 100%; background: #fff; }\n"
    "th, td { text-align: left; padding: .25em .6em; border-bottom: 1px solid"
    " #ddd;\n"
    "         white-space: nowrap; }\n"
    "th { background: #eee; font-weight: 600; }\n"
    "td.num { text-align: right; font-variant-numeric: tabular-nums; }\n"
    ".badge { display: inline-block; padding: 0 .5em; border-radius: .6em;\n"
    "         font-size: .85em; font-weight: 600; color: #fff; background: #8"
    "88; }\n"
    ".CLOSED, .active { background: #2a7d2a; }\n"
    ".DEGRADED { background: #b08000; }\n"
    ".OPEN, .terminal { background: #b00020; }\n"
    ".HALF_OPEN, .cooldown { background: #c06000; }\n"
    ".empty td { color: #888; font-style: italic; }\n"
    "form { margin: 1em 0; }\n"
    "input { font: inherit; width: 24em; }\n"
    "</style>\n"
    "</head>\n"
    "<body>\n"
    "<h1>omniroute status</h1>\n"
    "<div id=\"meta\">loading&hellip;</div>\n"
    "<div id=\"err\"></div>\n"
    "<form id=\"login\" hidden>\n"
    "<label>API token <input id=\"token\" type=\"password\" autocomplete=\"of"
    "f\"></label>\n"
    "<button type=\"submit\">Show</button>\n"
    "</form>\n"
    "<h2>Providers</h2>\n"
    "<table id=\"providers\"><thead><tr><th>provider</th><th>kind</th>\n"
    "<th>breaker</th><th>failures</th><th>retry in</th><th>connections</th>\n"
    "<th>last failure</th></tr></thead><tbody></tbody></table>\n"
    "<h2>Connections</h2>\n"
    "<table id=\"connections\"><thead><tr><th>connection</th><th>provider</th"
    ">\n"
    "<th>state</th><th>remaining</th><th>backoff</th><th>failures</th>\n"
    "<th>last error</th></tr></thead><tbody></tbody></table>\n"
    "<h2>Model lockouts</h2>\n"
    "<table id=\"lockouts\"><thead><tr><th>provider</th><th>connection</th>\n"
    "<th>model</th><th>scope</th><th>reason</th><th>remaining</th></tr></thea"
    "d>\n"
    "<tbody></tbody></table>\n"
    "<h2>Fallbacks</h2>\n"
    "<table id=\"fallbacks\"><thead><tr><th>reason</th><th>total</th>\n"
    "<th>since this page opened</th></tr></thead><tbody></tbody></table>\n"
    "<script>\n"
    "\"use strict\";\n"
    "(function () {\n"
    "  var base = location.pathname.replace(/\\/status\\/?$/, \"\");\n"
    "  var refresh = 5000, timer = null, first = null, skew = 0;\n"
    "  var hash = new URLSearchParams(location.hash.slice(1));\n"
    "  if (hash.get(\"token\")) {\n"
    "    sessionStorage.setItem(\"omniroute-token\", hash.get(\"token\"));\n"
    "    history.replaceState(null, \"\", location.pathname + location.search"
    ");\n"
    "  }\n"
    "  if (hash.get(\"refresh\") && +hash.get(\"refresh\") >= 1) {\n"
    "    refresh = +hash.get(\"refresh\") * 1000;\n"
    "  }\n"
    "  function $(id) { return document.getElementById(id); }\n"
    "  function el(tag, text, cls) {\n"
    "    var e = document.createElement(tag);\n"
    "    if (text !== undefined && text !== null) { e.textContent = String(te"
    "xt); }\n"
    "    if (cls) { e.className = cls; }\n"
    "    return e;\n"
    "  }\n"
    "  function badge(text) { return el(\"span\", text, \"badge \" + text); }"
    "\n"
    "  function secs(ms) {\n"
    "    if (ms === null || ms === undefined || ms <= 0) { return \"-\"; }\n"
    "    var s = Math.ceil(ms / 1000);\n"
    "    if (s < 120) { return s + \"s\"; }\n"
    "    if (s < 7200) { return Math.floor(s / 60) + \"m \" + (s % 60) + \"s"
    "\"; }\n"
    "    return Math.floor(s / 3600) + \"h \" + Math.floor(s % 3600 / 60) + "
    "\"m\";\n"
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
    "  function render(h, c, l) {\n"
    "    skew = h.time - Date.now();\n"
    "    fill(\"providers\", Object.keys(h.providers).map(function (name) {\n"
    "      var p = h.providers[name], k = p.connections;\n"
    "      return row([name, p.kind, badge(p.state), p.failures,\n"
    "                  secs(p.retry_after_ms),\n"
    "                  k.active + \" active, \" + k.cooldown + \" cooling, \""
    " +\n"
    "                  k.terminal + \" terminal\",\n"
    "                  p.last_reason ? p.last_reason + \", \" +\n"
    "                  ago(p.last_failure_at) : \"-\"],\n"
    "                 { provider: name, state: p.state });\n"
    "    }), 7, \"no providers\");\n"
    "    fill(\"connections\", c.connections.map(function (x) {\n"
    "      return row([x.id, x.provider, badge(x.terminal || x.status),\n"
    "                  x.terminal ? \"until reset\" : until(x.until),\n"
    "                  x.backoff_level, x.failures,\n"
    "                  x.last_error_type ? x.last_error_type +\n"
    "                  (x.last_status ? \" (\" + x.last_status + \")\" : \"\""
    ") : \"-\"],\n"
    "                 { connection: x.id, state: x.terminal || x.status });\n"
    "    }), 7, \"no connections\");\n"
    "    fill(\"lockouts\", l.lockouts.map(function (x) {\n"
    "      return row([x.provider, x.connection, x.model, x.scope, x.reason,"
    "\n"
    "                  until(x.expires_at)],\n"
    "                 { connection: x.connection, model: x.model });\n"
    "    }), 6, \"no active lockouts\");\n"
    "    var fb = h.stats.fallbacks;\n"
    "    if (first === null) { first = fb; }\n"
    "    fill(\"fallbacks\", Object.keys(fb).filter(function (k) {\n"
    "      return fb[k] > 0;\n"
    "    }).map(function (k) {\n"
    "      return row([k, fb[k], fb[k] - (first[k] || 0)], { reason: k });\n"
    "    }), 3, \"no fallbacks yet\");\n"
    "    $(\"meta\").textContent = \"status \" + h.status + \", Redis \" +\n"
    "      (h.redis ? h.redis.state : \"-\") + \", updated \" +\n"
    "      new Date(h.time).toLocaleTimeString() + \", refreshing every \" +"
    "\n"
    "      refresh / 1000 + \"s\";\n"
    "  }\n"
    "  function load() {\n"
    "    clearTimeout(timer);\n"
    "    Promise.all([get(\"/api/monitoring/health\"),\n"
    "                 get(\"/api/resilience/cooldowns\"),\n"
    "                 get(\"/api/resilience/model-cooldowns\")])\n"
    "      .then(function (v) {\n"
    "        $(\"err\").textContent = \"\";\n"
    "        $(\"login\").hidden = true;\n"
    "        render(v[0], v[1], v[2]);\n"
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
    "    sessionStorage.setItem(\"omniroute-token\", $(\"token\").value.trim("
    "));\n"
    "    $(\"token\").value = \"\";\n"
    "    load();\n"
    "  });\n"
    "  load();\n"
    "})();\n"
    "</script>\n"
    "</body>\n"
    "</html>\n"

    ;


static ngx_str_t  ngx_omniroute_status_csp = ngx_string(
    "default-src 'none'; "
    "script-src 'unsafe-inline'; "
    "style-src 'unsafe-inline'; "
    "connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'");
static ngx_str_t  ngx_omniroute_status_deny = ngx_string("DENY");
static ngx_str_t  ngx_omniroute_status_referrer = ngx_string("no-referrer");


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

    return ngx_omniroute_api_text(call, ngx_omniroute_status_html,
                                  sizeof(ngx_omniroute_status_html) - 1,
                                  "text/html; charset=utf-8");
}
