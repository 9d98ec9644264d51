// flowray's web UI: plain JS over the job master's REST API (Flink's paths), refreshed
// every 2 s. No library, no CDN. Tabs: job list, job graph (vertices coloured by busy,
// idle and back-pressured time, as Flink's), checkpoints, exceptions, watermarks, config.
"use strict";

const REFRESH_MS = 2000;
const state = { tab: "graph", jid: null, vertex: null, checkpoint: null, openExceptions: new Set() };
const $ = (sel) => document.querySelector(sel);

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "onclick") e.onclick = v; else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

async function get(path) {
  const r = await fetch(path, { cache: "no-store" });
  if (!r.ok) throw new Error(`${path}: HTTP ${r.status}`);
  return r.json();
}

function time(ms) { return ms > 0 ? new Date(ms).toLocaleTimeString() : "-"; }
function dur(ms) {
  if (ms < 0) return "-";
  if (ms < 1000) return `${ms} ms`;
  const s = Math.floor(ms / 1000);
  return s < 120 ? `${s} s` : `${Math.floor(s / 60)} min ${s % 60} s`;
}
function bytes(n) {
  const u = ["B", "KB", "MB", "GB"]; let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return `${i ? n.toFixed(1) : n} ${u[i]}`;
}
function rate(x) { return x >= 1000 ? `${(x / 1000).toFixed(1)}k/s` : `${x.toFixed(1)}/s`; }
function table(head, rows, attrs) {
  return el("table", attrs || {}, el("thead", {}, el("tr", {}, ...head.map((h) => el("th", {}, h)))),
    el("tbody", {}, ...rows));
}

// -- the job list -----------------------------------------------------------------------------
async function jobList() {
  const jobs = (await get("/jobs/overview")).jobs;
  if (!state.jid && jobs.length) state.jid = jobs[0].jid;
  const restarts = await Promise.all(jobs.map((j) => get(`/jobs/${j.jid}/metrics?get=numRestarts`)
    .then((m) => (m.length ? m[0].value : "-")).catch(() => "-")));
  return table(["job", "status", "started", "duration", "restarts", "tasks"], jobs.map((j, k) =>
    el("tr", { "data-job-id": j.jid, class: j.jid === state.jid ? "job-row selected" : "job-row" },
      el("td", {}, el("a", { href: "#", onclick: (ev) => { ev.preventDefault(); state.jid = j.jid; state.tab = "graph"; state.vertex = null; state.checkpoint = null; render(); } }, j.name)),
      el("td", { class: `status ${j.state}` }, j.state), el("td", {}, time(j["start-time"])),
      el("td", {}, dur(j.duration)), el("td", { class: "restarts" }, restarts[k]),
      el("td", {}, `${j.tasks.running}/${j.tasks.total} running`))),
  { id: "job-list" });
}

// -- the other jobs of the Ray cluster: each has a job master and web UI of its own -------------
async function clusterJobs(shown) {
  const all = await get("/flowray/cluster-jobs").then((r) => r.jobs).catch(() => []);
  const others = all.filter((j) => !shown.has(j.jid));
  if (!others.length) return null;
  return el("section", { id: "cluster-jobs" }, el("h3", {}, "Other jobs on this Ray cluster"),
    table(["job", "status", "started", "restarts", "web UI"], others.map((j) =>
      el("tr", { class: "cluster-job-row", "data-job-id": j.jid },
        el("td", {}, j.name), el("td", { class: `status ${j.state}` }, j.state),
        el("td", {}, time(j["start-time"])), el("td", {}, j.restarts),
        el("td", {}, j["web-url"] ? el("a", { href: j["web-url"], class: "web-url" }, j["web-url"]) : "none")))));
}

// -- the graph ----------------------------------------------------------------------------------
function layers(nodes) {
  const byId = Object.fromEntries(nodes.map((n) => [n.id, n]));
  const depth = {};
  const visit = (n) => {
    if (depth[n.id] !== undefined) return depth[n.id];
    depth[n.id] = 0;
    depth[n.id] = Math.max(0, ...(n.inputs || []).map((i) => visit(byId[i.id]) + 1));
    return depth[n.id];
  };
  nodes.forEach(visit);
  return depth;
}

function vertexColour(bp, status) {
  // Flink's: back-pressured (grey-black) over busy (red) over idle (blue); ended: plain
  if (["FINISHED", "CANCELED", "FAILED"].includes(status)) return { fill: "#eee", label: status.toLowerCase(), level: "ended" };
  if (!bp || !bp.subtasks.length) return { fill: "#dde", label: "no data yet" };
  const worst = bp.subtasks.reduce((a, s) => (s.ratio > a.ratio ? s : a));
  if (worst.ratio > 0.5) return { fill: "#555", text: "#fff", label: `back-pressured ${Math.round(worst.ratio * 100)}%`, level: "backpressured" };
  const busy = Math.max(...bp.subtasks.map((s) => s.busyRatio));
  const r = Math.round(120 + 135 * busy), b = Math.round(235 - 170 * busy);
  return { fill: `rgb(${r},150,${b})`, label: `busy ${Math.round(busy * 100)}%`, level: busy > 0.5 ? "busy" : "idle" };
}

async function graph(job) {
  const nodes = job.plan.nodes;
  const depth = layers(nodes);
  const cols = {};
  nodes.forEach((n) => { (cols[depth[n.id]] = cols[depth[n.id]] || []).push(n); });
  const W = 230, H = 96, GX = 90, GY = 30, pos = {};
  Object.entries(cols).forEach(([d, ns]) => ns.forEach((n, i) => { pos[n.id] = { x: 20 + d * (W + GX), y: 20 + i * (H + GY) }; }));
  const width = 40 + (Math.max(...Object.keys(cols).map(Number)) + 1) * (W + GX);
  const height = 40 + Math.max(...Object.values(cols).map((c) => c.length)) * (H + GY);
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("width", width); svg.setAttribute("height", height); svg.setAttribute("id", "job-graph");
  const info = {};
  await Promise.all(job.vertices.map(async (v) => {
    const [bp, m] = await Promise.all([
      get(`/jobs/${job.jid}/vertices/${v.id}/backpressure`).catch(() => null),
      get(`/jobs/${job.jid}/vertices/${v.id}/subtasks/metrics?get=numRecordsInPerSecond,numRecordsOutPerSecond`).catch(() => [])]);
    const sums = Object.fromEntries(m.map((x) => [x.id, x.sum]));
    info[v.id] = { bp, in: sums.numRecordsInPerSecond || 0, out: sums.numRecordsOutPerSecond || 0 };
  }));
  for (const n of nodes) for (const i of n.inputs || []) {
    const a = pos[i.id], b = pos[n.id];
    const line = document.createElementNS(ns, "line");
    Object.entries({ x1: a.x + W, y1: a.y + H / 2, x2: b.x, y2: b.y + H / 2, stroke: "#888", "stroke-width": 2, class: "edge" })
      .forEach(([k, v]) => line.setAttribute(k, v));
    svg.append(line);
    const t = document.createElementNS(ns, "text");
    t.setAttribute("x", (a.x + W + b.x) / 2 - 25); t.setAttribute("y", (a.y + b.y + H) / 2 - 6);
    t.setAttribute("font-size", "11"); t.textContent = i.ship_strategy; svg.append(t);
  }
  for (const v of job.vertices) {
    const p = pos[v.id]; const c = vertexColour(info[v.id].bp, v.status);
    const g = document.createElementNS(ns, "g");
    g.setAttribute("class", "vertex"); g.setAttribute("data-vertex-id", v.id);
    g.setAttribute("data-level", c.level || "none"); g.style.cursor = "pointer";
    g.onclick = () => { state.vertex = v.id; render(); };
    const rect = document.createElementNS(ns, "rect");
    Object.entries({ x: p.x, y: p.y, width: W, height: H, rx: 8, fill: c.fill, stroke: "#333" }).forEach(([k, val]) => rect.setAttribute(k, val));
    g.append(rect);
    const lines = [v.name.length > 34 ? v.name.slice(0, 33) + "…" : v.name, `parallelism ${v.parallelism} · ${v.status}`,
      `in ${rate(info[v.id].in)} · out ${rate(info[v.id].out)}`, c.label];
    lines.forEach((s, k) => {
      const t = document.createElementNS(ns, "text");
      t.setAttribute("x", p.x + 10); t.setAttribute("y", p.y + 22 + k * 19);
      t.setAttribute("font-size", k ? "12" : "13"); t.setAttribute("fill", c.text || "#000");
      if (!k) t.setAttribute("font-weight", "bold");
      t.textContent = s; g.append(t);
    });
    svg.append(g);
  }
  const parts = [el("div", { class: "legend" }, "colour: blue idle → red busy; grey back-pressured (over 50% of the time)"), svg];
  if (state.vertex) parts.push(await vertexPanel(job, state.vertex));
  return el("div", {}, ...parts);
}

async function vertexPanel(job, vid) {
  const [v, names] = await Promise.all([get(`/jobs/${job.jid}/vertices/${vid}`), get(`/jobs/${job.jid}/vertices/${vid}/subtasks/metrics`)]);
  const wanted = names.map((n) => n.id).filter((id) => !id.includes("["));
  const agg = wanted.length ? await get(`/jobs/${job.jid}/vertices/${vid}/subtasks/metrics?get=${encodeURIComponent(wanted.join(","))}`) : [];
  return el("section", { id: "vertex-panel", "data-vertex-id": vid },
    el("h3", {}, `${v.name} — subtasks`),
    table(["subtask", "status", "attempt", "started", "duration", "records in", "records out", "bytes in", "bytes out", "host"], v.subtasks.map((s) =>
      el("tr", { class: "subtask-row" }, el("td", {}, s.subtask), el("td", {}, s.status), el("td", {}, s.attempt),
        el("td", {}, time(s["start-time"])), el("td", {}, dur(s.duration)),
        el("td", {}, s.metrics["read-records"]), el("td", {}, s.metrics["write-records"]),
        el("td", {}, bytes(s.metrics["read-bytes"])), el("td", {}, bytes(s.metrics["write-bytes"])), el("td", {}, s.endpoint)))),
    el("h3", {}, "metrics over the subtasks"),
    table(["metric", "min", "max", "avg", "sum"], agg.map((a) =>
      el("tr", {}, el("td", {}, a.id), el("td", {}, a.min.toFixed(2)), el("td", {}, a.max.toFixed(2)),
        el("td", {}, a.avg.toFixed(2)), el("td", {}, a.sum.toFixed(2)))), { id: "vertex-metrics" }));
}

// -- checkpoints, exceptions, watermarks, configuration --------------------------------------------
async function checkpointsTab(job) {
  const c = await get(`/jobs/${job.jid}/checkpoints`);
  const parts = [el("p", { id: "checkpoint-counts" }, "completed ", el("b", { id: "checkpoint-count" }, c.counts.completed),
    ` · failed ${c.counts.failed} · in progress ${c.counts.in_progress} · restored ${c.counts.restored}`)];
  if (c.latest.restored) parts.push(el("p", {}, `latest restore: checkpoint ${c.latest.restored.id} at ${time(c.latest.restored.restore_timestamp)}`));
  parts.push(table(["id", "status", "type", "triggered", "duration", "size", "acknowledged", "failure"], c.history.map((h) =>
    el("tr", { class: `checkpoint-row ${h.status}`, "data-checkpoint-id": h.id },
      el("td", {}, el("a", { href: "#", onclick: (ev) => { ev.preventDefault(); state.checkpoint = h.id; render(); } }, h.id)),
      el("td", {}, h.status), el("td", {}, h.checkpoint_type), el("td", {}, time(h.trigger_timestamp)),
      el("td", {}, dur(h.end_to_end_duration)), el("td", {}, bytes(h.state_size)),
      el("td", {}, `${h.num_acknowledged_subtasks}/${h.num_subtasks}`), el("td", {}, h.failure_message || ""))),
  { id: "checkpoint-history" }));
  if (state.checkpoint !== null) {
    const d = await get(`/jobs/${job.jid}/checkpoints/details/${state.checkpoint}`).catch(() => null);
    if (d) parts.push(el("section", { id: "checkpoint-details" }, el("h3", {}, `checkpoint ${d.id}: acknowledgements`),
      ...Object.values(d.tasks).map((t) => table(["vertex " + t.id, "subtask", "status", "acknowledged", "size", "sync ms", "async ms", "alignment ms"],
        t.subtasks.map((s) => el("tr", {}, el("td", {}, ""), el("td", {}, s.index), el("td", {}, s.status),
          el("td", {}, s.ack_timestamp ? time(s.ack_timestamp) : "-"), el("td", {}, s.state_size !== undefined ? bytes(s.state_size) : "-"),
          el("td", {}, s.checkpoint ? s.checkpoint.sync : "-"), el("td", {}, s.checkpoint ? s.checkpoint.async : "-"),
          el("td", {}, s.alignment ? s.alignment.duration : "-")))))));
  }
  return el("div", {}, ...parts);
}

function rootCause(x) {
  // a Python traceback names the exception and its message last; other causes first
  const lines = (x.stacktrace || "").split("\n").map((l) => l.trim()).filter(Boolean);
  if (!lines.length) return x.exceptionName;
  return lines[0].startsWith("Traceback") ? lines[lines.length - 1] : lines[0];
}

async function exceptionsTab(job) {
  const e = (await get(`/jobs/${job.jid}/exceptions`)).exceptionHistory;
  if (!e.entries.length) return el("p", { id: "no-exceptions" }, "No exceptions: the job has not restarted.");
  return el("div", { id: "exceptions" }, ...e.entries.map((x) => {
    const key = `${x.timestamp}/${x.taskName}`;
    const d = el("details", { class: "exception-entry" },
      el("summary", {}, `${time(x.timestamp)} · ${x.taskName} · `, el("b", {}, x.exceptionName)),
      el("pre", {}, x.stacktrace));
    d.open = state.openExceptions.has(key);   // stays open across refreshes
    d.ontoggle = () => { if (d.open) state.openExceptions.add(key); else state.openExceptions.delete(key); };
    return el("div", { class: "exception" }, d, el("p", { class: "root-cause" }, "cause: ", el("code", {}, rootCause(x))));
  }));
}

async function watermarksTab(job) {
  const rows = [];
  for (const v of job.vertices) {
    const w = await get(`/jobs/${job.jid}/vertices/${v.id}/watermarks`).catch(() => []);
    for (const m of w) {
      const val = Number(m.value);
      const shown = val <= -9e18 ? "no watermark yet" : val >= 9e18 ? "end of input" : `${m.value} (${new Date(val).toISOString()})`;
      rows.push(el("tr", { class: "watermark-row" }, el("td", {}, v.name), el("td", {}, m.id.split(".")[0]), el("td", {}, shown)));
    }
  }
  return rows.length ? table(["vertex", "subtask", "current input watermark"], rows, { id: "watermarks" })
    : el("p", {}, "No watermarks: no vertex has an input with event time.");
}

async function configTab(job) {
  const c = (await get(`/jobs/${job.jid}/config`))["execution-config"];
  return table(["key", "value"], Object.entries(c["user-config"]).map(([k, v]) => el("tr", {}, el("td", {}, k), el("td", {}, v))), { id: "job-config" });
}

// -- the page ----------------------------------------------------------------------------------------
const TABS = { graph: "Job graph", checkpoints: "Checkpoints", exceptions: "Exceptions", watermarks: "Watermarks", config: "Configuration" };

async function render() {
  try {
    const list = await jobList();
    const parts = [el("h2", {}, "Jobs"), list];
    const shown = new Set([...list.querySelectorAll("tr.job-row")].map((r) => r.dataset.jobId));
    const others = await clusterJobs(shown);
    if (others) parts.push(others);
    if (state.jid) {
      const job = await get(`/jobs/${state.jid}`);
      $("#job-title").textContent = `${job.name} · ${job.state}`;
      parts.push(el("nav", { id: "tabs" }, ...Object.entries(TABS).map(([k, label]) =>
        el("a", { href: "#", class: k === state.tab ? "tab active" : "tab", "data-tab": k, onclick: (ev) => { ev.preventDefault(); state.tab = k; render(); } }, label))));
      const body = { graph, checkpoints: checkpointsTab, exceptions: exceptionsTab, watermarks: watermarksTab, config: configTab }[state.tab];
      parts.push(el("div", { id: `tab-${state.tab}`, class: "tab-body" }, await body(job)));
    }
    $("#app").replaceChildren(...parts);
    $("#app").setAttribute("data-updated", Date.now());
  } catch (err) {
    $("#app").prepend(el("p", { class: "error" }, `could not refresh: ${err.message}`));
  }
}

// the history server (flowray history) serves ended jobs with the same pages
get("/config").then((c) => {
  if (c.features && c.features["web-history"]) {
    document.title = "flowray history";
    $("header b").textContent = "flowray history";
  }
}).catch(() => {});
render();
setInterval(render, REFRESH_MS);
