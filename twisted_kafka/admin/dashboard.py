"""``GET /``: a one-page dashboard drawn from the JSON API, refreshed every second.

The page is static -- it holds no data, so it is served without the token --
and its script reads ``/v1/topics``, ``/v1/groups``, ``/v1/planes``,
``/v1/connections`` and ``/v1/connections/ips`` every second with the token
the operator gives (typed in, or in the address as ``#token=...``; kept in the
tab's sessionStorage only).

What it shows, top to bottom, filling the window (tables scroll inside their
card, nothing overlaps):

* the broker's figures now: messages in/s, bytes in/s and out/s, partitions,
  under-replicated and offline partitions, the consumer groups' total lag,
  open connections;
* throughput over the last two minutes, in and out: messages/s and bytes/s;
* topics (partitions, replication, under-replicated, size on this broker,
  messages and bytes in/s, bytes out/s) and consumer groups (state, members,
  lag in total and per partition);
* each plane's request queue depth and the Produce and Fetch p99 request
  time over the last two minutes, the connections per listener and client IP
  and the rejections by reason.

Rates are the broker's counters (Kafka's BrokerTopicMetrics meters, their
``*_total`` in /v1/topics) differenced between refreshes, so they follow
traffic within a second or two (the one-minute rates the API also gives lag
behind by design).  The charts are SVG drawn by the script: labelled axes
with ticks and units.  Everything is inline (no CDN, no external script or
style), so the page works where the broker's admin address is all there is.
"""

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>twisted_kafka broker</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
*{box-sizing:border-box}
html,body{height:100%}
body{font:13px system-ui,sans-serif;margin:0;padding:10px;background:#f3f4f7;color:#1d2330;
  height:100vh;min-height:880px;display:grid;gap:10px;
  grid-template-rows:auto auto minmax(0,1fr) minmax(0,1.1fr) minmax(0,1fr)}
header{display:flex;align-items:center;gap:16px;flex-wrap:wrap}
h1{font-size:17px;margin:0} h2{font-size:13px;margin:0 0 6px;color:#3b4252}
#status{color:#666;font-size:12px} #tokenbox{margin-left:auto;font-size:12px}
.row{display:grid;gap:10px;min-height:0}
.two{grid-template-columns:1fr 1fr} .three{grid-template-columns:1fr 1fr 1.4fr}
.kpis{display:grid;grid-template-columns:repeat(8,minmax(0,1fr));gap:10px}
.card{background:#fff;border:1px solid #d9dce3;border-radius:6px;padding:8px 10px;min-height:0;min-width:0;
  display:flex;flex-direction:column;overflow:hidden}
.kpi .label{font-size:11px;color:#5b6475;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
.kpi .value{font-size:22px;font-weight:600;white-space:nowrap}
.kpi.warn .value{color:#c0392b}
.chart{flex:1;min-height:0;position:relative} .chart svg{position:absolute;inset:0;width:100%;height:100%}
.legend{display:flex;gap:12px;font-size:11px;color:#333;margin-bottom:2px;flex-wrap:wrap}
.legend i{display:inline-block;width:12px;height:3px;margin-right:4px;vertical-align:middle}
.scroll{flex:1;min-height:0;overflow:auto}
table{border-collapse:collapse;width:100%}
td,th{border-bottom:1px solid #eef0f4;padding:2px 4px;text-align:left;font-size:12px;white-space:nowrap}
th{position:sticky;top:0;background:#fff;color:#5b6475;font-weight:600}
.num{text-align:right;font-variant-numeric:tabular-nums} .bad{color:#c0392b;font-weight:600}
td.name{max-width:16em;overflow:hidden;text-overflow:ellipsis} td.internal{color:#7b8394;font-style:italic}
.sub td{color:#5b6475;font-size:11px;border-bottom:none} .sub td:first-child{padding-left:18px}
.split{display:grid;grid-template-columns:1fr 1fr;gap:8px;margin-top:6px}
.chips{margin-top:6px;font-size:11px;color:#5b6475} .chips span{margin-right:10px;white-space:nowrap}
.chips span.bad{color:#c0392b}
svg text{font-size:10px;fill:#444} svg .title{font-size:10px;fill:#666}
svg .grid{stroke:#eceef3} svg .axis{stroke:#9aa1ad}
</style></head><body>
<header><h1>twisted_kafka broker <span id="broker-id"></span></h1><span id="status">starting</span>
<span id="tokenbox">Token: <input id="token" type="password" size="24"> <button id="settoken">use</button></span>
</header>
<section class="kpis">
 <div class="card kpi"><div class="label">Messages in</div><div class="value" id="kpi-messages-in">-</div></div>
 <div class="card kpi"><div class="label">Bytes in</div><div class="value" id="kpi-bytes-in">-</div></div>
 <div class="card kpi"><div class="label">Bytes out</div><div class="value" id="kpi-bytes-out">-</div></div>
 <div class="card kpi"><div class="label">Partitions</div><div class="value" id="kpi-partitions">-</div></div>
 <div class="card kpi" id="kpi-urp-card"><div class="label">Under-replicated</div>
  <div class="value" id="kpi-under-replicated">-</div></div>
 <div class="card kpi" id="kpi-offline-card"><div class="label">Offline partitions</div>
  <div class="value" id="kpi-offline">-</div></div>
 <div class="card kpi"><div class="label">Consumer lag (total)</div><div class="value" id="kpi-lag">-</div></div>
 <div class="card kpi"><div class="label">Open connections</div><div class="value" id="open-total">-</div></div>
</section>
<section class="row two">
 <div class="card"><h2>Messages per second, in and out</h2><div class="legend" id="legend-messages"></div>
  <div class="chart"><svg id="chart-messages"></svg></div></div>
 <div class="card"><h2>Bytes per second, in and out</h2><div class="legend" id="legend-bytes"></div>
  <div class="chart"><svg id="chart-bytes"></svg></div></div>
</section>
<section class="row two">
 <div class="card"><h2>Topics</h2><div class="scroll"><table id="topics"><thead><tr><th>topic</th>
  <th class="num">partitions</th><th class="num">RF</th><th class="num">under-repl.</th><th class="num">size</th>
  <th class="num">msg in/s</th><th class="num">bytes in/s</th><th class="num">bytes out/s</th></tr></thead>
  <tbody></tbody></table></div></div>
 <div class="card"><h2>Consumer groups (coordinated here)</h2><div class="scroll"><table id="groups"><thead><tr>
  <th>group / partition</th><th>state</th><th class="num">members</th><th class="num">committed</th>
  <th class="num">log end</th><th class="num">lag</th></tr></thead><tbody></tbody></table></div></div>
</section>
<section class="row three">
 <div class="card"><h2>Request queue depth per plane</h2><div class="legend" id="legend-queue"></div>
  <div class="chart"><svg id="chart-queue"></svg></div></div>
 <div class="card"><h2>Request time, p99 (Produce, Fetch)</h2><div class="legend" id="legend-latency"></div>
  <div class="chart"><svg id="chart-latency"></svg></div></div>
 <div class="card"><h2>Connections</h2><div class="scroll">
  <table id="listeners"><thead><tr><th>listener</th><th>plane</th><th class="num">open</th>
   <th class="num">accepted</th><th class="num">rejected</th><th class="num">closed</th></tr></thead><tbody></tbody>
  </table>
  <div class="split"><div><table id="planes"><thead><tr><th>plane</th><th class="num">queue</th>
   <th class="num">capacity</th><th class="num">idle %</th></tr></thead><tbody></tbody></table></div>
   <div><table id="ips"><thead><tr><th>client ip</th><th class="num">open</th><th class="num">limit</th>
   <th class="num">rejected</th></tr></thead><tbody></tbody></table></div></div>
  <div class="chips" id="rejections"></div>
 </div></div>
</section>
<script>
"use strict";
const COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"];
const HISTORY = 120;          // samples kept: one per refresh (1 s)
const RATE_WINDOW = 5;        // seconds a table's rate is averaged over
const series = {messages: {}, bytes: {}, queue: {}, latency: {}};
const snapshots = [];         // [{t, totals, topics: {name: totals}}], the last RATE_WINDOW + 1 seconds
let token = sessionStorage.getItem("admin-token") || "";
const frag = new URLSearchParams(location.hash.slice(1));
if (frag.get("token")) { token = frag.get("token"); sessionStorage.setItem("admin-token", token); }
document.getElementById("settoken").onclick = () => {
  token = document.getElementById("token").value; sessionStorage.setItem("admin-token", token); };

function get(path) {
  const headers = token ? {"Authorization": "Bearer " + token} : {};
  return fetch(path, {headers}).then(r => r.ok ? r.json() : r.json().then(e => Promise.reject(e.message)));
}
function optional(path) { return get(path).catch(() => null); }

// -- numbers ---------------------------------------------------------------------------------
function si(value, unit, digits) {
  const abs = Math.abs(value);
  for (const [factor, prefix] of [[1e9, "G"], [1e6, "M"], [1e3, "k"]]) {
    if (abs >= factor) return (value / factor).toFixed(digits === undefined ? 1 : digits) + " " + prefix + unit;
  }
  return (abs >= 10 || value === 0 ? value.toFixed(0) : value.toFixed(1)) + " " + unit;
}
function compact(value) {
  // a tick label: at most three significant digits and an SI prefix (the unit is in the axis title)
  const abs = Math.abs(value);
  for (const [factor, prefix] of [[1e9, "G"], [1e6, "M"], [1e3, "k"]]) {
    if (abs >= factor) return String(Number((value / factor).toPrecision(3))) + prefix;
  }
  return String(Number(value.toPrecision(3)));
}
function niceStep(max, ticks) {
  const raw = max / ticks, pow = Math.pow(10, Math.floor(Math.log10(raw)));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * pow >= raw) return m * pow;
  return 10 * pow;
}

// -- DOM helpers ------------------------------------------------------------------------------
function cell(tag, value, cls, attrs) {
  const td = document.createElement(tag); td.textContent = value; if (cls) td.className = cls;
  for (const k in attrs || {}) td.setAttribute(k, attrs[k]); return td; }
function fill(id, rows) {
  const body = document.querySelector("#" + id + " tbody"); body.replaceChildren();
  for (const row of rows) {
    const tr = document.createElement("tr");
    if (row.attrs) for (const k in row.attrs) tr.setAttribute(k, row.attrs[k]);
    if (row.cls) tr.className = row.cls;
    (row.cells || row).forEach((v, i) => tr.appendChild(
      v instanceof Node ? v : cell("td", v, i ? "num" : ""))); body.appendChild(tr); } }
function push(store, key, value) {
  (store[key] = store[key] || []).push(value); if (store[key].length > HISTORY) store[key].shift(); }
function setKpi(id, text, value) {
  const el = document.getElementById(id); el.textContent = text; el.dataset.value = String(value); }

// -- charts: hand-written SVG, axes with ticks and units ------------------------------------
const NS = "http://www.w3.org/2000/svg";
function el(name, attrs, content) { const e = document.createElementNS(NS, name);
  for (const k in attrs) e.setAttribute(k, attrs[k]); if (content !== undefined) e.textContent = content; return e; }
function legend(id, names) {
  const box = document.getElementById(id); box.replaceChildren();
  names.forEach((name, i) => { const s = document.createElement("span");
    const swatch = document.createElement("i"); swatch.style.background = COLORS[i % COLORS.length];
    s.appendChild(swatch); s.appendChild(document.createTextNode(name)); box.appendChild(s); }); }
function chart(id, store, unit, yTitle) {
  const svg = document.getElementById(id); const box = svg.getBoundingClientRect();
  const w = Math.max(200, box.width), h = Math.max(90, box.height);
  svg.replaceChildren(); svg.setAttribute("viewBox", "0 0 " + w + " " + h);
  const names = Object.keys(store); legend("legend-" + id.slice(6), names);
  let max = 0; for (const k of names) for (const v of store[k]) max = Math.max(max, v);
  const top0 = 8, bottom = 30, ph = h - top0 - bottom;
  const ticks = Math.max(2, Math.min(5, Math.floor(ph / 28)));
  const step = Math.max(max > 0 ? niceStep(max, ticks) : 1, unit === "requests" ? 1 : 0);   // whole requests
  const top = step * Math.max(1, Math.ceil(max / step));
  const labels = [];
  for (let v = 0; v <= top + step / 2; v += step) labels.push([v, compact(v)]);
  const widest = Math.max(...labels.map(l => l[1].length));
  const m = {left: 22 + 6.5 * widest, right: 12, top: top0, bottom};
  const pw = w - m.left - m.right;
  const y = v => m.top + ph - v * ph / top, x = i => m.left + i * pw / (HISTORY - 1);
  const axis = el("g", {"class": "y-axis", "data-unit": unit, "data-max": String(top)});
  for (const [v, label] of labels) {
    axis.appendChild(el("line", {x1: m.left, x2: m.left + pw, y1: y(v), y2: y(v), "class": "grid"}));
    axis.appendChild(el("text", {x: m.left - 5, y: y(v) + 3, "text-anchor": "end", "class": "tick"}, label));
  }
  svg.appendChild(axis);
  const xaxis = el("g", {"class": "x-axis"});
  for (let s = HISTORY - 1; s >= 0; s -= 30) {
    const ago = HISTORY - 1 - s;
    xaxis.appendChild(el("line", {x1: x(s), x2: x(s), y1: m.top + ph, y2: m.top + ph + 4, "class": "axis"}));
    xaxis.appendChild(el("text", {x: x(s), y: m.top + ph + 14, "text-anchor": "middle", "class": "tick"},
                         ago ? "-" + ago + " s" : "now"));
  }
  xaxis.appendChild(el("line", {x1: m.left, x2: m.left + pw, y1: m.top + ph, y2: m.top + ph, "class": "axis"}));
  xaxis.appendChild(el("line", {x1: m.left, x2: m.left, y1: m.top, y2: m.top + ph, "class": "axis"}));
  xaxis.appendChild(el("text", {x: m.left + pw / 2, y: h - 3, "text-anchor": "middle", "class": "title"},
                       "time (seconds ago)"));
  xaxis.appendChild(el("text", {x: 9, y: m.top + ph / 2, "text-anchor": "middle", "class": "title y-title",
                                transform: "rotate(-90 9 " + (m.top + ph / 2) + ")"}, yTitle + " (" + unit + ")"));
  svg.appendChild(xaxis);
  names.forEach((k, i) => {
    const values = store[k], offset = HISTORY - values.length;
    const pts = values.map((v, j) => x(offset + j).toFixed(1) + "," + y(v).toFixed(1));
    // from the second series on, dashed: equal in and out rates draw one over the other
    svg.appendChild(el("polyline", {points: pts.join(" "), fill: "none", stroke: COLORS[i % COLORS.length],
                                    "stroke-width": 1.8, "stroke-dasharray": i ? "6 3" : "none", "data-series": k,
                                    "data-last": String(values[values.length - 1] || 0)}));
  });
}

// -- rates from the broker's counters -------------------------------------------------------
function rate(pick) {
  if (snapshots.length < 2) return null;
  const last = snapshots[snapshots.length - 1];
  let first = snapshots[0];
  for (const s of snapshots) if (last.t - s.t <= RATE_WINDOW * 1000) { first = s; break; }
  const dt = (last.t - first.t) / 1000, a = pick(first), b = pick(last);
  if (dt <= 0 || a === undefined || b === undefined) return null;
  return Math.max(0, (b - a) / dt);
}
function lastRate(pick) {
  if (snapshots.length < 2) return 0;
  const a = snapshots[snapshots.length - 2], b = snapshots[snapshots.length - 1];
  const dt = (b.t - a.t) / 1000, va = pick(a), vb = pick(b);
  return dt > 0 && va !== undefined && vb !== undefined ? Math.max(0, (vb - va) / dt) : 0;
}

function drawTopics(data) {
  const topics = {};
  for (const t of data.topics) topics[t.name] = t;
  snapshots.push({t: Date.now(), totals: data.totals, topics});
  while (snapshots.length > RATE_WINDOW + 2) snapshots.shift();
  const totals = s => s.totals;
  push(series.messages, "messages in", lastRate(s => totals(s).messages_in_total));
  push(series.bytes, "bytes in", lastRate(s => totals(s).bytes_in_total));
  push(series.bytes, "bytes out", lastRate(s => totals(s).bytes_out_total));
  push(series.bytes, "replication out", lastRate(s => totals(s).replication_bytes_out_total));
  // Kafka counts no messages out; a consumer's share of bytes out is what leaves per message
  const bytesOut = rate(s => totals(s).bytes_out_total), bytesIn = rate(s => totals(s).bytes_in_total);
  const msgsIn = rate(s => totals(s).messages_in_total);
  const perMsg = msgsIn && bytesIn ? bytesIn / msgsIn : null;
  push(series.messages, "messages out (est.)", perMsg && bytesOut !== null ? lastRate(
    s => totals(s).bytes_out_total) / perMsg : 0);
  setKpi("kpi-messages-in", si(msgsIn || 0, "msg/s"), msgsIn || 0);
  setKpi("kpi-bytes-in", si(bytesIn || 0, "B/s"), bytesIn || 0);
  setKpi("kpi-bytes-out", si(bytesOut || 0, "B/s"), bytesOut || 0);
  const partitions = data.topics.reduce((n, t) => n + t.partition_count, 0);
  setKpi("kpi-partitions", String(partitions), partitions);
  setKpi("kpi-under-replicated", String(data.under_replicated_partitions), data.under_replicated_partitions);
  setKpi("kpi-offline", String(data.offline_partitions), data.offline_partitions);
  document.getElementById("kpi-urp-card").classList.toggle("warn", data.under_replicated_partitions > 0);
  document.getElementById("kpi-offline-card").classList.toggle("warn", data.offline_partitions > 0);
  document.getElementById("broker-id").textContent = "(broker " + data.broker_id + ")";
  const rows = [];
  const ordered = data.topics.slice().sort((a, b) => (a.internal - b.internal) || a.name.localeCompare(b.name));
  for (const t of ordered) {
    const r = key => rate(s => s.topics[t.name] && s.topics[t.name][key]);
    const inMsgs = r("messages_in_total"), inBytes = r("bytes_in_total"), outBytes = r("bytes_out_total");
    rows.push({attrs: {"data-topic": t.name, "data-messages-in": String(inMsgs || 0),
                       "data-bytes-in": String(inBytes || 0), "data-bytes-out": String(outBytes || 0)},
               cells: [cell("td", t.name, "name" + (t.internal ? " internal" : ""), {title: t.internal ?
                         t.name + " (internal)" : t.name}), t.partition_count, t.replication_factor,
                       cell("td", t.under_replicated, "num" + (t.under_replicated ? " bad" : "")),
                       si(t.size, "B"), si(inMsgs || 0, "msg/s"), si(inBytes || 0, "B/s"), si(outBytes || 0, "B/s")]});
  }
  fill("topics", rows);
}

function drawGroups(data) {
  const rows = []; let total = 0;
  for (const g of data.groups) {
    total += g.total_lag || 0;
    rows.push({attrs: {"data-group": g.group_id, "data-lag": String(g.total_lag === null ? "" : g.total_lag)},
               cells: [g.group_id, g.state, g.member_count, "", "",
                       cell("td", g.total_lag === null ? "-" : g.total_lag.toLocaleString("en"), "num",
                            {"data-lag": String(g.total_lag)})]});
    for (const p of g.partitions) rows.push({cls: "sub", attrs: {"data-partition": p.topic + "-" + p.partition},
      cells: [p.topic + "-" + p.partition, "", "", p.committed_offset,
              p.log_end_offset === null ? "-" : p.log_end_offset, p.lag === null ? "-" : p.lag]});
  }
  fill("groups", rows);
  setKpi("kpi-lag", total.toLocaleString("en"), total);
}

function drawConnections(conns, ips, planes) {
  setKpi("open-total", String(conns.open_total), conns.open_total);
  fill("listeners", conns.listeners.map(l => [l.listener, l.plane, l.open, l.accepted_total, l.rejected_total,
                                              l.closed_total]));
  const rejected = {};
  for (const l of conns.listeners) for (const r in l.rejected) rejected[r] = (rejected[r] || 0) + l.rejected[r];
  const chips = document.getElementById("rejections"); chips.replaceChildren(document.createTextNode("rejected: "));
  for (const r of Object.keys(rejected)) {
    const chip = document.createElement("span"); chip.textContent = r.replace("_", " ") + " " + rejected[r];
    chip.dataset.reason = r; chip.dataset.count = String(rejected[r]); if (rejected[r]) chip.className = "bad";
    chips.appendChild(chip); }
  fill("ips", ips.ips.map(i => [i.ip, i.open, i.limit >= 2147483647 ? "none" : i.limit, i.rejected]));
  fill("planes", planes.planes.map(p => [p.plane, p.queue_size, p.queue_capacity,
                                         p.handler_idle_percent === null ? "-" : p.handler_idle_percent]));
  for (const p of planes.planes) push(series.queue, p.plane + " plane", p.queue_size);
  for (const api of ["Produce", "Fetch"]) {
    const entry = planes.apis[api];
    push(series.latency, api, entry && entry.total_time_ms ? entry.total_time_ms.p99 : 0);
  }
}

function redraw() {
  chart("chart-messages", series.messages, "msg/s", "messages per second");
  chart("chart-bytes", series.bytes, "B/s", "bytes per second");
  chart("chart-queue", series.queue, "requests", "queued");
  chart("chart-latency", series.latency, "ms", "p99 total time");
}

async function refresh() {
  try {
    const [topics, groups, conns, ips, planes] = await Promise.all([
      optional("/v1/topics"), optional("/v1/groups"), get("/v1/connections"), get("/v1/connections/ips"),
      get("/v1/planes")]);
    if (topics) drawTopics(topics);
    if (groups) drawGroups(groups);
    drawConnections(conns, ips, planes);
    redraw();
    document.getElementById("status").textContent = "updated " + new Date().toLocaleTimeString();
    document.body.dataset.refreshed = String(Number(document.body.dataset.refreshed || 0) + 1);
  } catch (e) { document.getElementById("status").textContent = "error: " + e; }
}
window.addEventListener("resize", redraw);
refresh(); setInterval(refresh, 1000);
</script></body></html>
"""
