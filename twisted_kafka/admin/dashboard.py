"""``GET /``: a one-page dashboard drawn from the JSON API, refreshed every second.

The page is static -- it holds no data, so it is served without the token --
and its script fetches ``/v1/connections``, ``/v1/connections/ips`` and
``/v1/planes`` every second with the token the operator gives (typed in, or
in the address as ``#token=...``; kept in the tab's sessionStorage only).
Everything is inline (no CDN, no external script): the charts are SVG drawn
by the script.
"""

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>twisted_kafka broker</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font:14px system-ui,sans-serif;margin:16px;background:#f7f7f9;color:#222}
h1{font-size:18px;margin:0 0 12px} h2{font-size:15px;margin:0 0 8px}
.grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(400px,1fr));gap:12px}
.card{background:#fff;border:1px solid #ddd;border-radius:6px;padding:12px;overflow-x:auto}
.big{font-size:28px;font-weight:600} table{border-collapse:collapse;width:100%}
td,th{border-bottom:1px solid #eee;padding:3px 4px;text-align:left;font-size:13px} .num{text-align:right}
#status{color:#666;font-size:12px} #tokenbox{margin-bottom:12px} svg{width:100%;height:140px}
</style></head><body>
<h1>twisted_kafka broker &mdash; connections and planes</h1>
<div id="tokenbox">Token: <input id="token" type="password" size="30">
<button id="settoken">use</button> <span id="status">starting</span></div>
<div class="grid">
 <div class="card"><h2>Open connections</h2><div class="big" id="open-total">0</div>
  <table id="listeners"><thead><tr><th>listener</th><th>plane</th><th class="num">open</th>
  <th class="num">accepted</th><th class="num">rejected</th><th class="num">closed</th></tr></thead>
  <tbody></tbody></table></div>
 <div class="card"><h2>Open connections per listener (last 60 s)</h2><svg id="open-chart"></svg></div>
 <div class="card"><h2>Rejections by reason</h2><svg id="reject-chart"></svg></div>
 <div class="card"><h2>Request queue depth per plane (last 60 s)</h2><svg id="queue-chart"></svg></div>
 <div class="card"><h2>Per IP</h2><table id="ips"><thead><tr><th>ip</th><th class="num">open</th>
  <th class="num">limit</th><th class="num">rejected</th></tr></thead><tbody></tbody></table></div>
 <div class="card"><h2>Planes</h2><table id="planes"><thead><tr><th>plane</th><th class="num">queue</th>
  <th class="num">capacity</th><th class="num">idle %</th></tr></thead><tbody></tbody></table></div>
</div>
<script>
"use strict";
const COLORS = ["#1f77b4","#ff7f0e","#2ca02c","#d62728","#9467bd","#8c564b"];
const HISTORY = 60;
const series = {open: {}, queue: {}};
let token = sessionStorage.getItem("admin-token") || "";
const frag = new URLSearchParams(location.hash.slice(1));
if (frag.get("token")) { token = frag.get("token"); sessionStorage.setItem("admin-token", token); }
document.getElementById("settoken").onclick = () => {
  token = document.getElementById("token").value; sessionStorage.setItem("admin-token", token); };
function get(path) {
  const headers = token ? {"Authorization": "Bearer " + token} : {};
  return fetch(path, {headers}).then(r => r.ok ? r.json() : r.json().then(e => Promise.reject(e.message)));
}
function text(tag, value, cls) { const td = document.createElement(tag); td.textContent = value;
  if (cls) td.className = cls; return td; }
function fill(id, rows) { const body = document.querySelector("#" + id + " tbody"); body.replaceChildren();
  for (const row of rows) { const tr = document.createElement("tr");
    row.forEach((v, i) => tr.appendChild(text("td", v, i ? "num" : ""))); body.appendChild(tr); } }
function push(store, key, value) { (store[key] = store[key] || []).push(value);
  if (store[key].length > HISTORY) store[key].shift(); }
const NS = "http://www.w3.org/2000/svg";
function el(name, attrs, content) { const e = document.createElementNS(NS, name);
  for (const k in attrs) e.setAttribute(k, attrs[k]); if (content !== undefined) e.textContent = content; return e; }
function lines(id, store) {
  const svg = document.getElementById(id); const w = svg.clientWidth || 340, h = 140;
  svg.replaceChildren(); let max = 1;
  for (const k in store) for (const v of store[k]) max = Math.max(max, v);
  svg.appendChild(el("text", {x: 2, y: 12, "font-size": 10}, "max " + max));
  Object.keys(store).forEach((k, i) => {
    const pts = store[k].map((v, j) =>
      (j * w / (HISTORY - 1)).toFixed(1) + "," + (h - 4 - v * (h - 20) / max).toFixed(1));
    svg.appendChild(el("polyline", {points: pts.join(" "), fill: "none", stroke: COLORS[i % COLORS.length],
                                    "stroke-width": 2}));
    svg.appendChild(el("text", {x: w - 110, y: 12 + 12 * i, "font-size": 10, fill: COLORS[i % COLORS.length]}, k));
  });
}
function bars(id, counts) {
  const svg = document.getElementById(id); const w = svg.clientWidth || 340, h = 140;
  svg.replaceChildren(); const keys = Object.keys(counts); const max = Math.max(1, ...Object.values(counts));
  const bw = w / Math.max(1, keys.length);
  keys.forEach((k, i) => { const bh = counts[k] * (h - 34) / max;
    svg.appendChild(el("rect", {x: i * bw + 4, y: h - 20 - bh, width: bw - 8, height: bh,
      fill: COLORS[i % COLORS.length], "data-reason": k, "data-count": counts[k]}));
    svg.appendChild(el("text", {x: i * bw + bw / 2, y: h - 6, "font-size": 9, "text-anchor": "middle"},
                       k.replace("_", " ")));
    svg.appendChild(el("text", {x: i * bw + 4, y: h - 24 - bh, "font-size": 10}, String(counts[k]))); });
}
async function refresh() {
  try {
    const [conns, ips, planes] = await Promise.all([get("/v1/connections"), get("/v1/connections/ips"),
                                                    get("/v1/planes")]);
    document.getElementById("open-total").textContent = conns.open_total;
    fill("listeners", conns.listeners.map(l => [l.listener, l.plane, l.open, l.accepted_total, l.rejected_total,
                                                l.closed_total]));
    const rejected = {};
    for (const l of conns.listeners) { push(series.open, l.listener, l.open);
      for (const r in l.rejected) rejected[r] = (rejected[r] || 0) + l.rejected[r]; }
    lines("open-chart", series.open); bars("reject-chart", rejected);
    fill("ips", ips.ips.map(i => [i.ip, i.open, i.limit, i.rejected]));
    fill("planes", planes.planes.map(p => [p.plane, p.queue_size, p.queue_capacity,
                                           p.handler_idle_percent === null ? "-" : p.handler_idle_percent]));
    for (const p of planes.planes) push(series.queue, p.plane, p.queue_size);
    lines("queue-chart", series.queue);
    document.getElementById("status").textContent = "updated " + new Date().toLocaleTimeString();
    document.body.dataset.refreshed = String(Number(document.body.dataset.refreshed || 0) + 1);
  } catch (e) { document.getElementById("status").textContent = "error: " + e; }
}
refresh(); setInterval(refresh, 1000);
</script></body></html>
"""
