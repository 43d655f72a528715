// The logbroker web console: plain JavaScript, no build step, no library. Every figure comes
// from the broker's REST routes (/api/..., see python/logbroker/console/__init__.py); every
// text from the cluster is put in the page as text (textContent), never as HTML.
"use strict";

const $ = (id) => document.getElementById(id);
const REFRESH_MS = { cluster: 2000, topics: 5000, topic: 3000, groups: 5000, group: 2000, throughput: 2000 };
const COLORS = ["#2f6fdb", "#d9480f", "#2b8a3e", "#862e9c", "#c2255c", "#0b7285", "#e67700", "#5c940d", "#364fc7", "#a61e4d"];

// What the page shows now; tests read `window.logbrokerConsole.throughput` (the chart data).
// `csrf`: the session's CSRF token, sent with every request that changes something (a console
// with logins; python/logbroker/console/sessions.py); `loggedOut`: the login form is shown.
const state = { page: null, arg: null, view: 0, timer: null, busy: null, pending: null, throughput: null, cluster: null,
                csrf: null, user: null, loggedOut: false };
window.logbrokerConsole = state;

async function api(method, path, body) {
  const options = { method, headers: {}, credentials: "same-origin" };
  if (body !== undefined) {
    options.headers["Content-Type"] = "application/json";
    options.body = JSON.stringify(body);
  }
  if (state.csrf && method !== "GET") options.headers["X-CSRF-Token"] = state.csrf;
  const response = await fetch(path, options);
  let data = null;
  try {
    data = await response.json();
  } catch (e) {
    data = null;
  }
  if (!response.ok) {
    const message = data && data.error ? data.error : `HTTP ${response.status}`;
    if (response.status === 401 && path !== "/api/login") showLogin(message);
    throw new Error(message);
  }
  return data;
}

// --- login -------------------------------------------------------------------------------

function showWho() {
  $("who").textContent = state.user ? `logged in as ${state.user}` : "";
  $("who").hidden = !state.user;
  $("logout").hidden = !state.user;
}

function showLogin(message) {
  const first = !state.loggedOut;
  state.loggedOut = true;
  state.csrf = null;
  state.user = null;
  showWho();
  if (state.timer) clearInterval(state.timer);
  state.timer = null;
  for (const section of document.querySelectorAll("section.page")) section.hidden = section.id !== "page-login";
  if (first && message) notice(message, true);
}

$("login").addEventListener("submit", async (event) => {
  event.preventDefault();
  const form = new FormData(event.target);
  try {
    const s = await api("POST", "/api/login", { username: form.get("username"), password: form.get("password") });
    state.csrf = s.csrf_token;
    state.user = s.user;
    state.loggedOut = false;
    event.target.reset();
    showWho();
    clearNotice();
    state.page = null;
    route();
  } catch (e) {
    notice(e.message, true);
  }
});

$("logout").addEventListener("click", async () => {
  try {
    await api("POST", "/api/logout");
  } catch (e) {
    // the session may already be gone: the login form is what follows either way
  }
  showLogin();
  notice("logged out");
});

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null) continue;
    if (k === "text") node.textContent = v;
    else if (k === "className") node.className = v;
    else if (k === "testid") node.dataset.testid = v;
    else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c);
  return node;
}

function cell(value, testid, className) {
  return el("td", { text: value === null || value === undefined ? "-" : String(value), testid, className });
}

function fill(tbody, rows) {
  tbody.replaceChildren(...rows);
}

function notice(text, isError) {
  const box = $("notice");
  box.textContent = text;
  box.className = isError ? "error" : "";
  box.dataset.kind = isError ? "error" : "ok";
  box.hidden = false;
}

function clearNotice() {
  $("notice").hidden = true;
}

// Go to another page and say `message` there (a page change clears the previous notice).
function go(hash, message) {
  if (location.hash === hash) {
    notice(message);
    return;
  }
  state.pending = message;
  location.hash = hash;
}

function bytes(n) {
  if (n === null || n === undefined) return "-";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${i ? n.toFixed(1) : n} ${units[i]}`;
}

function ids(list) {
  return (list || []).join(",");
}

// --- routing ---------------------------------------------------------------------------

function parseHash() {
  const hash = decodeURIComponent(location.hash.replace(/^#/, "")) || "cluster";
  const [path, query] = hash.split("?");
  const slash = path.indexOf("/");
  const page = slash < 0 ? path : path.slice(0, slash);
  const arg = slash < 0 ? null : path.slice(slash + 1);
  return { page, arg, query: new URLSearchParams(query || "") };
}

const LOADERS = {};

// Loads the page shown; a load still in flight for it is not started again, one for a page
// left meanwhile neither blocks this one nor reports its errors here.
async function refresh() {
  const view = state.view;
  const loader = LOADERS[state.page];
  if (!loader || state.busy === view) return;
  state.busy = view;
  try {
    await loader(state.arg);
  } catch (e) {
    if (state.view === view) notice(e.message, true);
  } finally {
    if (state.busy === view) state.busy = null;
  }
}

function route() {
  if (state.loggedOut) return;
  const { page, arg, query } = parseHash();
  const known = LOADERS[page] || page === "messages" ? page : "cluster";
  if (state.timer) clearInterval(state.timer);
  state.timer = null;
  if (state.page !== known || state.arg !== arg) clearNotice();
  if (state.pending) {
    notice(state.pending);
    state.pending = null;
  }
  state.page = known;
  state.arg = arg;
  state.view += 1;
  for (const section of document.querySelectorAll("section.page")) section.hidden = section.id !== `page-${known}`;
  const tab = { topic: "topics", group: "groups" }[known] || known;
  for (const a of document.querySelectorAll("header nav a")) a.classList.toggle("active", a.dataset.tab === tab);
  if (known === "messages") {
    openMessages(query);
    return;
  }
  refresh();
  if (REFRESH_MS[known]) state.timer = setInterval(refresh, REFRESH_MS[known]);
}

// --- cluster -----------------------------------------------------------------------------

LOADERS.cluster = async () => {
  const c = await api("GET", "/api/cluster");
  state.cluster = c;
  $("cluster-id").textContent = `cluster ${c.cluster_id}`;
  $("controller").textContent = c.controller_id >= 0 ? String(c.controller_id) : "none";
  $("cluster-asked").textContent = `(as broker ${c.bootstrap_server} sees it)`;
  const quorum = {};
  if (c.quorum) {
    for (const v of c.quorum.voters.concat(c.quorum.observers)) quorum[v.node_id] = v;
    $("quorum-line").textContent = `metadata quorum: leader ${c.quorum.leader_id}, epoch ${c.quorum.leader_epoch}, ` +
      `high watermark ${c.quorum.high_watermark}`;
  } else {
    $("quorum-line").textContent = c.quorum_error ? `quorum: ${c.quorum_error}` : "";
  }
  fill($("brokers"), c.nodes.map((n) => {
    const q = quorum[n.node_id];
    const qtext = q ? `${q.status}${q.lag ? `, ${q.lag} behind` : ""}` : "-";
    return el("tr", { testid: `broker-${n.node_id}`, "data-status": n.status },
      cell(n.node_id), cell(n.host ? `${n.host}:${n.port}` : null), cell(n.rack), cell(n.roles.join(",")),
      cell(n.status, `broker-status-${n.node_id}`, `status-${n.status}`), cell(qtext));
  }));
  const problems = c.partitions || [];
  $("problems-none").hidden = problems.length > 0;
  $("problems-table").hidden = problems.length === 0;
  fill($("problems"), problems.map((p) => el("tr", { testid: `problem-${p.topic}-${p.partition}` },
    cell(p.topic), cell(p.partition), cell(p.leader), cell(ids(p.replicas)), cell(ids(p.isr)),
    cell(p.status, `problem-state-${p.topic}-${p.partition}`, `state-${p.status}`))));
};

// --- topics ------------------------------------------------------------------------------

// tiered storage: bytes in remote storage ("" where the broker has none configured)
const remote = (n) => (n === null || n === undefined ? "" : bytes(n));

LOADERS.topics = async () => {
  const internal = $("show-internal").checked ? "?internal=1" : "";
  const topics = await api("GET", `/api/topics${internal}`);
  fill($("topics"), topics.map((t) => {
    const attention = [t.offline ? `${t.offline} offline` : "", t.under_replicated ? `${t.under_replicated} under-replicated` : ""]
      .filter(Boolean).join(", ");
    const link = el("a", { href: `#topic/${encodeURIComponent(t.topic)}`, text: t.topic, testid: `topic-link-${t.topic}` });
    return el("tr", { testid: `topic-${t.topic}` }, el("td", {}, link), cell(t.partitions), cell(t.replication_factor),
      cell(t.records), cell(bytes(t.size_bytes)), cell(remote(t.remote_size_bytes), `topic-remote-${t.topic}`),
      cell(attention || "", null, attention ? "state-under-replicated" : ""));
  }));
};

$("show-internal").addEventListener("change", refresh);

$("create-topic").addEventListener("submit", async (event) => {
  event.preventDefault();
  const form = event.target;
  const configs = {};
  for (const line of form.elements.configs.value.split(/[\n,]/)) {
    const text = line.trim();
    if (!text) continue;
    const eq = text.indexOf("=");
    if (eq <= 0) {
      notice(`config ${JSON.stringify(text)} is not key=value`, true);
      return;
    }
    configs[text.slice(0, eq).trim()] = text.slice(eq + 1).trim();
  }
  const body = { name: form.elements.name.value.trim(), configs };
  if (form.elements.partitions.value) body.partitions = Number(form.elements.partitions.value);
  if (form.elements.replication_factor.value) body.replication_factor = Number(form.elements.replication_factor.value);
  try {
    const t = await api("POST", "/api/topics", body);
    form.reset();
    go(`#topic/${encodeURIComponent(t.topic)}`, `created topic ${t.topic}: ${t.partitions.length} partition(s)`);
  } catch (e) {
    notice(e.message, true);
  }
});

LOADERS.topic = async (name) => {
  const t = await api("GET", `/api/topics/${encodeURIComponent(name)}`);
  $("topic-name").textContent = t.topic + (t.internal ? " (internal)" : "");
  $("topic-browse").href = `#messages?topic=${encodeURIComponent(t.topic)}`;
  fill($("partitions"), t.partitions.map((p) => {
    const records = p.latest_offset !== null && p.earliest_offset !== null ? p.latest_offset - p.earliest_offset : null;
    return el("tr", { testid: `partition-${p.partition}` }, cell(p.partition), cell(p.leader, `partition-leader-${p.partition}`),
      cell(ids(p.replicas)), cell(ids(p.isr), `partition-isr-${p.partition}`), cell(p.earliest_offset),
      cell(p.latest_offset, `partition-end-${p.partition}`), cell(records),
      cell(p.earliest_local_offset, `partition-local-start-${p.partition}`), cell(bytes(p.size_bytes)),
      cell(remote(p.remote_size_bytes), `partition-remote-${p.partition}`),
      cell(p.state, `partition-state-${p.partition}`, `state-${p.state}`));
  }));
  const keys = Object.keys(t.configs || {});
  fill($("configs"), keys.map((k) => el("tr", { testid: `config-${k}` }, cell(k), cell(t.configs[k], `config-value-${k}`))));
  fill($("config-keys"), keys.map((k) => el("option", { value: k })));
};

$("alter-config").addEventListener("submit", async (event) => {
  event.preventDefault();
  const form = event.target;
  const key = form.elements.key.value.trim();
  const value = form.elements.value.value;
  const body = value === "" ? { delete: [key] } : { set: { [key]: value } };
  try {
    await api("POST", `/api/topics/${encodeURIComponent(state.arg)}/config`, body);
    notice(value === "" ? `${key} is back to its default` : `${key} = ${value}`);
    form.reset();
    await refresh();
  } catch (e) {
    notice(e.message, true);
  }
});

$("topic-delete").addEventListener("click", async () => {
  const name = state.arg;
  if (!confirm(`Delete topic ${name} and all its records?`)) return;
  try {
    await api("DELETE", `/api/topics/${encodeURIComponent(name)}`);
    go("#topics", `deleted topic ${name}`);
  } catch (e) {
    notice(e.message, true);
  }
});

// --- groups ------------------------------------------------------------------------------

LOADERS.groups = async () => {
  const groups = await api("GET", "/api/groups");
  fill($("groups"), groups.map((g) => el("tr", { testid: `group-${g.group}` },
    el("td", {}, el("a", { href: `#group/${encodeURIComponent(g.group)}`, text: g.group, testid: `group-link-${g.group}` })),
    cell(g.state, `group-state-${g.group}`), cell(g.protocol_type))));
};

LOADERS.group = async (id) => {
  const g = await api("GET", `/api/groups/${encodeURIComponent(id)}`);
  $("group-name").textContent = g.group;
  $("group-state").textContent = g.state;
  $("group-protocol").textContent = `${g.protocol_type || "-"}/${g.protocol || "-"}`;
  const lags = g.partitions.map((p) => p.lag).filter((x) => x !== null);
  $("group-lag").textContent = lags.length ? String(lags.reduce((a, b) => a + b, 0)) : "-";
  fill($("members"), g.members.map((m, i) => el("tr", { testid: `member-${i}` }, cell(m.member_id), cell(m.client_id), cell(m.host),
    cell(Object.entries(m.assignment).map(([t, ps]) => `${t}: ${ps.join(",")}`).join("; ")))));
  fill($("lag"), g.partitions.map((p) => {
    const k = `${p.topic}-${p.partition}`;
    return el("tr", { testid: `lag-${k}` }, cell(p.topic), cell(p.partition), cell(p.committed_offset, `committed-${k}`),
      cell(p.log_end_offset, `end-${k}`), cell(p.lag, `lag-value-${k}`), cell(p.member));
  }));
  const topic = $("reset-offsets").elements.topic;
  if (!topic.value && g.partitions.length) topic.value = g.partitions[0].topic;
};

$("reset-offsets").addEventListener("submit", async (event) => {
  event.preventDefault();
  const form = event.target;
  const body = { topic: form.elements.topic.value.trim(), to: form.elements.to.value };
  if (form.elements.value.value !== "") body.value = Number(form.elements.value.value);
  try {
    const r = await api("POST", `/api/groups/${encodeURIComponent(state.arg)}/reset-offsets`, body);
    notice(`reset ${r.group} on ${r.topic}: ` + r.offsets.map((o) => `partition ${o.partition} → ${o.offset}`).join(", "));
    await refresh();
  } catch (e) {
    notice(e.message, true);
  }
});

// --- messages ----------------------------------------------------------------------------

async function openMessages(query) {
  const select = $("browse").elements.topic;
  try {
    const topics = await api("GET", "/api/topics");
    const current = query.get("topic") || select.value;
    fill(select, topics.map((t) => el("option", { value: t.topic, text: t.topic })));
    if (current) select.value = current;
  } catch (e) {
    notice(e.message, true);
  }
  if (query.get("partition")) $("browse").elements.partition.value = query.get("partition");
}

function shown(value, format) {
  if (value === null || value === undefined) return el("span", { className: "muted", text: "null" });
  const text = format === "json" ? JSON.stringify(value, null, 2) : String(value);
  return el("pre", { text });
}

$("browse").addEventListener("submit", async (event) => {
  event.preventDefault();
  const form = event.target;
  const params = new URLSearchParams({ partition: form.elements.partition.value || "0", limit: form.elements.limit.value || "50",
    format: form.elements.format.value });
  if (form.elements.from.value !== "last") {
    if (form.elements.position.value === "") {
      notice(`give the ${form.elements.from.value} to read from`, true);
      return;
    }
    params.set(form.elements.from.value, form.elements.position.value);
  }
  try {
    const r = await api("GET", `/api/topics/${encodeURIComponent(form.elements.topic.value)}/messages?${params}`);
    clearNotice();
    $("msg-summary").textContent = `${r.topic}-${r.partition}: offsets ${r.earliest_offset} to ${r.latest_offset}; ` +
      `${r.records.length} record(s) from offset ${r.start_offset} as ${r.format}`;
    fill($("messages"), r.records.map((m) => {
      const bad = new Set(m.not_json || []);
      const headers = el("td", { testid: `msg-headers-${m.offset}` },
        ...m.headers.map(([k, v]) => el("div", { className: "header" }, el("strong", { text: `${k}: ` }), shown(v, r.format))));
      const key = el("td", { testid: `msg-key-${m.offset}`, className: bad.has("key") ? "notjson" : "" }, shown(m.key, r.format));
      const value = el("td", { testid: `msg-value-${m.offset}`, className: bad.has("value") ? "notjson" : "" },
        shown(m.value, r.format));
      if (bad.size) value.title = `not JSON: ${[...bad].join(", ")}`;
      return el("tr", { testid: `msg-${m.offset}` }, cell(m.offset), cell(new Date(m.timestamp).toISOString()),
        key, value, headers);
    }));
  } catch (e) {
    notice(e.message, true);
  }
});

// --- throughput --------------------------------------------------------------------------

function color(topics, name) {
  return COLORS[topics.indexOf(name) % COLORS.length];
}

function draw(canvas, samples, field, topics, unit) {
  const ctx = canvas.getContext("2d");
  const w = canvas.width, h = canvas.height, left = 70, bottom = 20, top = 10;
  ctx.clearRect(0, 0, w, h);
  let max = unit === "bytes" ? 1024 : 4;  // idle axes read 0..1 KiB/s and 0..4 records/s
  for (const s of samples) for (const v of Object.values(s[field])) max = Math.max(max, v);
  ctx.strokeStyle = "#dde1e8";
  ctx.fillStyle = "#6b7385";
  ctx.font = "11px sans-serif";
  for (let i = 0; i <= 4; i++) {
    const y = top + (h - top - bottom) * (1 - i / 4);
    ctx.beginPath(); ctx.moveTo(left, y); ctx.lineTo(w, y); ctx.stroke();
    const label = unit === "bytes" ? bytes(Math.round(max * i / 4)) + "/s" : (max * i / 4).toFixed(max < 10 ? 1 : 0);
    ctx.fillText(label, 4, y + 4);
  }
  if (samples.length < 2) {
    ctx.fillText("waiting for samples...", left + 10, h / 2);
    return;
  }
  const t0 = samples[0].time, t1 = samples[samples.length - 1].time;
  const x = (t) => left + (w - left - 5) * (t1 === t0 ? 1 : (t - t0) / (t1 - t0));
  const y = (v) => top + (h - top - bottom) * (1 - v / max);
  for (const name of topics) {
    ctx.strokeStyle = color(topics, name);
    ctx.lineWidth = 2;
    ctx.beginPath();
    let drawing = false;
    for (const s of samples) {
      const v = s[field][name];
      if (v === undefined) { drawing = false; continue; }
      if (drawing) ctx.lineTo(x(s.time), y(v)); else ctx.moveTo(x(s.time), y(v));
      drawing = true;
    }
    ctx.stroke();
  }
  ctx.fillStyle = "#6b7385";
  ctx.fillText(new Date(t0).toLocaleTimeString(), left, h - 4);
  ctx.fillText(new Date(t1).toLocaleTimeString(), w - 70, h - 4);
}

LOADERS.throughput = async () => {
  const d = await api("GET", "/api/throughput");
  state.throughput = d;
  $("tp-interval").textContent = String(d.interval_s);
  draw($("chart-records"), d.samples, "records_per_s", d.topics, "records");
  draw($("chart-bytes"), d.samples, "bytes_per_s", d.topics, "bytes");
  const last = d.samples.length ? d.samples[d.samples.length - 1] : { records_per_s: {}, bytes_per_s: {} };
  const names = Object.keys(d.totals);
  fill($("rates"), names.map((n) => el("tr", { testid: `rate-${n}` },
    el("td", {}, el("span", { className: "swatch", style: `background:${d.topics.includes(n) ? color(d.topics, n) : "#ccc"}` })),
    cell(n), cell(last.records_per_s[n], `rate-records-${n}`), cell(last.bytes_per_s[n] === undefined ? null : bytes(last.bytes_per_s[n]) + "/s"),
    cell(d.totals[n].records, `total-records-${n}`), cell(bytes(d.totals[n].bytes)))));
  if (d.error) notice(`throughput: the last sample failed: ${d.error}`, true);
};

window.addEventListener("hashchange", route);

// A console with logins says who is logged in, or answers 401 (the login form); one without says
// login_required false.
(async () => {
  try {
    const s = await api("GET", "/api/session");
    state.csrf = s.csrf_token || null;
    state.user = s.user;
    showWho();
  } catch (e) {
    return;
  }
  route();
})();
