// Switchyard dashboard: one vanilla ES module, no dependencies, no build.
//
// The page signs in with an API token (kept in this tab's sessionStorage),
// sends it as `Authorization: Bearer` to /v1 like any other client, and
// follows /v1/events through fetch streaming (EventSource cannot send
// headers). Routes live in the URL's hash: #/, #/tasks, #/tasks/42,
// #/workflows, #/executions/7. Everything is built with DOM calls, never
// from HTML strings, so no value from the API is ever parsed as markup.

const TOKEN_KEY = "switchyard.token";
const SCOPES = { read: 1, write: 2, admin: 3 };
const TASK_STATES = ["waiting", "scheduled", "queued", "in_progress", "retrying", "completed", "failed", "cancelled"];
const DEPTH_STATES = ["waiting", "scheduled", "queued", "in_progress", "retrying"];
const CANCELLABLE = new Set(["waiting", "scheduled", "queued", "in_progress", "retrying"]);
const RETRYABLE = new Set(["failed", "cancelled", "completed"]);
const EXEC_STATUSES = ["pending", "running", "paused", "completed", "failed", "cancelled", "timed_out"];
const EXEC_FINAL = new Set(["completed", "failed", "cancelled", "timed_out"]);
const STEP_STATUSES = ["pending", "ready", "running", "waiting", "completed", "failed", "skipped", "cancelled"];

// ---------------------------------------------------------------- DOM helpers

const SVG_NS = "http://www.w3.org/2000/svg";

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// h builds an HTML element: h("a.link", {href}, "text", child...).
function h(spec, attrs, ...children) {
  const [tag, ...classes] = spec.split(".");
  const el = document.createElement(tag || "div");
  if (classes.length) el.className = classes.join(" ");
  if (attrs && (typeof attrs !== "object" || attrs instanceof Node || Array.isArray(attrs))) {
    children.unshift(attrs);
    attrs = null;
  }
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "style") Object.assign(el.style, v);
    else if (k === "class") el.className = [el.className, v].filter(Boolean).join(" ");
    else if (k === "dataset") Object.assign(el.dataset, v);
    else if (v === true) el.setAttribute(k, "");
    else el.setAttribute(k, String(v));
  }
  return append(el, children);
}

// s builds an SVG element.
function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, String(v));
  }
  return append(el, children);
}

function clear(el) {
  while (el.firstChild) el.firstChild.remove();
  return el;
}

// fill replaces el's children (null, undefined and false are skipped).
function fill(el, ...children) {
  return append(clear(el), children);
}

// ---------------------------------------------------------------- formatting

function fmtAge(seconds) {
  if (seconds === null || seconds === undefined || Number.isNaN(seconds)) return "–";
  seconds = Math.max(0, seconds);
  if (seconds < 10) return `${seconds.toFixed(1)}s`;
  if (seconds < 60) return `${Math.round(seconds)}s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m ${Math.round(seconds % 60)}s`;
  if (seconds < 86400) return `${Math.floor(seconds / 3600)}h ${Math.floor((seconds % 3600) / 60)}m`;
  return `${Math.floor(seconds / 86400)}d ${Math.floor((seconds % 86400) / 3600)}h`;
}

function since(iso) {
  return iso ? (Date.now() - Date.parse(iso)) / 1000 : null;
}

function ago(iso) {
  if (!iso) return "–";
  const sec = since(iso);
  return sec < 0 ? `in ${fmtAge(-sec)}` : `${fmtAge(sec)} ago`;
}

function fmtTime(iso, withMillis) {
  if (!iso) return "–";
  const d = new Date(iso);
  const pad = (n, w = 2) => String(n).padStart(w, "0");
  let t = `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  if (withMillis) t += `.${pad(d.getMilliseconds(), 3)}`;
  const today = new Date();
  if (d.toDateString() !== today.toDateString()) t = `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${t}`;
  return t;
}

function timeEl(iso, relative = true) {
  if (!iso) return h("span.muted", "–");
  return h("time", { datetime: iso, title: new Date(iso).toLocaleString(), dataset: relative ? { rel: "1" } : {} },
    relative ? ago(iso) : fmtTime(iso));
}

function between(a, b) {
  if (!a) return null;
  return ((b ? Date.parse(b) : Date.now()) - Date.parse(a)) / 1000;
}

function plural(n, word) {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}

function label(state) {
  return String(state).replace(/_/g, " ");
}

function badge(state, kind = "state") {
  return h("span.badge", { class: `${kind}-${state}`, dataset: { state } }, label(state));
}

function pretty(value) {
  if (value === undefined || value === null) return "";
  try {
    return JSON.stringify(value, null, 2);
  } catch {
    return String(value);
  }
}

function jsonBlock(value, empty = "none") {
  if (value === undefined || value === null) return h("p.muted", empty);
  return h("pre.json", pretty(value));
}

// ---------------------------------------------------------------- API client

class ApiError extends Error {
  constructor(status, problem) {
    super((problem && (problem.detail || problem.title)) || `HTTP ${status}`);
    this.status = status;
    this.problem = problem;
  }
}

const session = {
  token: sessionStorage.getItem(TOKEN_KEY) || "",
  me: null, // {name, scope}
  can(scope) {
    return !!this.me && SCOPES[this.me.scope] >= SCOPES[scope];
  },
};

async function api(method, path, body) {
  const headers = { Authorization: `Bearer ${session.token}`, Accept: "application/json" };
  const init = { method, headers, cache: "no-store" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const res = await fetch(path, init);
  const text = await res.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (res.status === 401) {
    signOut("Your token was not accepted; sign in again.");
    throw new ApiError(401, data);
  }
  if (!res.ok) throw new ApiError(res.status, data);
  return data;
}

function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    for (const item of [].concat(v)) if (item !== "" && item !== undefined && item !== null) q.append(k, item);
  }
  const str = q.toString();
  return str ? `?${str}` : "";
}

// ---------------------------------------------------------------- toasts

function toast(message, kind = "info") {
  let box = document.getElementById("toasts");
  if (!box) {
    box = h("div.toasts", { id: "toasts" });
    document.body.append(box);
  }
  const t = h("div.toast", { class: `toast-${kind}`, role: "status" }, message);
  box.append(t);
  setTimeout(() => t.classList.add("leaving"), 4200);
  setTimeout(() => t.remove(), 4800);
}

function failed(err) {
  if (err && err.status === 401) return;
  toast(err instanceof ApiError ? err.message : `Request failed: ${err}`, "error");
}

// actionButton is a button that runs fn, disabled while it runs; with
// confirm, the first click asks ("Confirm cancel") and a second click
// within four seconds acts. Every action button has the class "action", so
// a read-only token's pages can be checked to have none.
function actionButton(text, fn, { confirm = null, kind = "", name = "" } = {}) {
  const btn = h("button.btn.action", { type: "button", class: kind, dataset: { action: name || text.toLowerCase() } }, text);
  let armed = null;
  btn.addEventListener("click", async () => {
    if (confirm && !armed) {
      btn.textContent = confirm;
      btn.classList.add("confirming");
      armed = setTimeout(() => {
        armed = null;
        btn.textContent = text;
        btn.classList.remove("confirming");
      }, 4000);
      return;
    }
    clearTimeout(armed);
    armed = null;
    btn.classList.remove("confirming");
    btn.textContent = text;
    btn.disabled = true;
    try {
      await fn();
    } catch (err) {
      failed(err);
    } finally {
      btn.disabled = false;
    }
  });
  return btn;
}

// ---------------------------------------------------------------- event stream

// stream follows /v1/events with fetch (so the token goes in a header),
// parses Server-Sent Events and hands {event, data} to its listeners. It
// reconnects with backoff; after a reconnect, or when the server says
// changes were missed, listeners get a "resync" and re-read what they show.
const stream = {
  listeners: new Set(),
  statusListeners: new Set(),
  status: "off",
  controller: null,
  generation: 0,

  on(fn) {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  },
  emit(msg) {
    for (const fn of [...this.listeners]) {
      try {
        fn(msg);
      } catch (err) {
        console.error(err);
      }
    }
  },
  setStatus(st) {
    this.status = st;
    for (const fn of this.statusListeners) fn(st);
  },
  start() {
    this.stop();
    const gen = ++this.generation;
    this.loop(gen);
  },
  stop() {
    this.generation++;
    if (this.controller) this.controller.abort();
    this.controller = null;
    this.setStatus("off");
  },
  async loop(gen) {
    let delay = 1000;
    let connectedBefore = false;
    while (gen === this.generation) {
      this.setStatus(connectedBefore ? "reconnecting" : "connecting");
      const controller = new AbortController();
      this.controller = controller;
      try {
        const res = await fetch("/v1/events", {
          headers: { Authorization: `Bearer ${session.token}`, Accept: "text/event-stream" },
          signal: controller.signal,
          cache: "no-store",
        });
        if (res.status === 401) {
          signOut("Your token was not accepted; sign in again.");
          return;
        }
        if (!res.ok || !res.body) throw new Error(`HTTP ${res.status}`);
        this.setStatus("live");
        if (connectedBefore) this.emit({ event: "resync", data: { missed: 0, reconnected: true } });
        connectedBefore = true;
        delay = 1000;
        await this.read(res.body, gen);
      } catch (err) {
        if (gen !== this.generation) return;
      }
      if (gen !== this.generation) return;
      this.setStatus("reconnecting");
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 10000);
    }
  },
  async read(body, gen) {
    const reader = body.getReader();
    const decoder = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done || gen !== this.generation) return;
      buf += decoder.decode(value, { stream: true });
      let idx;
      while ((idx = buf.search(/\r?\n\r?\n/)) >= 0) {
        const frame = buf.slice(0, idx);
        buf = buf.slice(idx + (buf[idx] === "\r" ? 4 : 2));
        this.frame(frame);
      }
    }
  },
  frame(frame) {
    let event = "message";
    const data = [];
    for (const line of frame.split(/\r?\n/)) {
      if (!line || line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "event") event = value;
      else if (field === "data") data.push(value);
    }
    if (!data.length) return;
    let parsed;
    try {
      parsed = JSON.parse(data.join("\n"));
    } catch {
      return;
    }
    if (event === "task") rates.record(parsed);
    if (event === "resync") rates.missed += parsed.missed || 0;
    this.emit({ event, data: parsed });
  },
};

// rates keeps the outcomes of the task events seen since sign-in, in
// five-second buckets, for the overview's chart.
const BUCKET_MS = 5000;
const BUCKETS = 60; // five minutes
const MIN_BUCKETS = 12; // one minute
const rates = {
  buckets: new Map(), // bucket index -> {completed, failed, retried, started}
  since: Date.now(),
  missed: 0,
  record(e) {
    const key = Math.floor(Date.now() / BUCKET_MS);
    let b = this.buckets.get(key);
    if (!b) {
      b = { completed: 0, failed: 0, retried: 0, started: 0 };
      this.buckets.set(key, b);
      for (const k of this.buckets.keys()) if (k < key - BUCKETS * 2) this.buckets.delete(k);
    }
    if (e.state === "completed") b.completed++;
    else if (e.state === "failed") b.failed++;
    // A failed attempt whose backoff is short goes straight back to
    // queued: count any return to waiting after an attempt as a retry.
    else if (e.state === "retrying" || ((e.state === "queued" || e.state === "scheduled") && e.attempt > 0)) b.retried++;
    else if (e.state === "in_progress") b.started++;
  },
  // series lists the buckets of the last five minutes, or of the time
  // since sign-in when that is shorter (at least one minute), oldest first.
  series() {
    const now = Math.floor(Date.now() / BUCKET_MS);
    const first = Math.max(now - BUCKETS + 1, Math.min(Math.floor(this.since / BUCKET_MS), now - MIN_BUCKETS + 1));
    const out = [];
    for (let k = first; k <= now; k++) {
      out.push({ key: k, ...(this.buckets.get(k) || { completed: 0, failed: 0, retried: 0, started: 0 }) });
    }
    return out;
  },
};

// throttle returns fn limited to one call per wait ms; a call during the
// wait runs once at its end.
function throttle(fn, wait) {
  let timer = null;
  let pending = false;
  let last = 0;
  const run = () => {
    timer = null;
    last = Date.now();
    pending = false;
    fn();
  };
  const wrapped = () => {
    if (timer) {
      pending = true;
      return;
    }
    const delay = Math.max(0, last + wait - Date.now());
    timer = setTimeout(run, delay);
  };
  wrapped.cancel = () => {
    clearTimeout(timer);
    timer = null;
    pending = false;
  };
  return wrapped;
}

// ---------------------------------------------------------------- shell

const app = {
  root: null,
  main: null,
  page: null, // {dispose}
  disposers: [],
};

function signOut(message) {
  sessionStorage.removeItem(TOKEN_KEY);
  session.token = "";
  session.me = null;
  stream.stop();
  disposePage();
  renderSignIn(message);
}

function renderSignIn(message) {
  const input = h("input", {
    id: "token",
    type: "password", name: "token", autocomplete: "off", spellcheck: "false", required: true,
    placeholder: "API token", "aria-label": "API token",
  });
  const error = h("p.signin-error", { role: "alert" }, message || "");
  const button = h("button.btn.primary", { type: "submit" }, "Sign in");
  const form = h("form.signin-card", {
    onsubmit: async (ev) => {
      ev.preventDefault();
      button.disabled = true;
      error.textContent = "";
      try {
        await signIn(input.value.trim());
      } catch (err) {
        error.textContent = err.status === 401 ? "That token is not valid." : `Sign-in failed: ${err.message}`;
        session.token = "";
      } finally {
        button.disabled = false;
      }
    },
  },
  h("div.signin-brand", logo(), h("span", "Switchyard")),
  h("h1", "Sign in"),
  h("p.muted", "Use an API token (", h("code", "SWITCHYARD_API_TOKENS"), "). A read token shows everything; write and admin tokens can also act."),
  input, error, button,
  h("p.fine", "The token stays in this browser tab (sessionStorage) and is sent only to this server."));
  fill(document.getElementById("app"), h("div.signin", form));
  input.focus();
}

async function signIn(token) {
  session.token = token;
  const res = await fetch("/v1/whoami", { headers: { Authorization: `Bearer ${token}` }, cache: "no-store" });
  if (!res.ok) {
    let problem = null;
    try {
      problem = await res.json();
    } catch {
      problem = null;
    }
    throw new ApiError(res.status, problem);
  }
  session.me = await res.json();
  sessionStorage.setItem(TOKEN_KEY, token);
  renderShell();
}

function logo() {
  return s("svg", { viewBox: "0 0 32 32", width: 26, height: 26, class: "logo", "aria-hidden": "true" },
    s("rect", { width: 32, height: 32, rx: 7, fill: "#0f172a" }),
    s("path", { d: "M6 22h8l6-12h6M6 10h8l2.4 4.8M20 22h6", fill: "none", stroke: "#38bdf8", "stroke-width": 2.6, "stroke-linecap": "round", "stroke-linejoin": "round" }));
}

function renderShell() {
  const live = h("span.live", { title: "Live updates from /v1/events" }, h("span.dot"), h("span.live-text", "connecting"));
  const setLive = (st) => {
    live.dataset.status = st;
    live.querySelector(".live-text").textContent = { live: "Live", connecting: "Connecting", reconnecting: "Reconnecting", off: "Offline" }[st] || st;
  };
  stream.statusListeners.clear();
  stream.statusListeners.add(setLive);
  const nav = h("nav.nav",
    h("a", { href: "#/", dataset: { nav: "overview" } }, "Overview"),
    h("a", { href: "#/tasks", dataset: { nav: "tasks" } }, "Tasks"),
    h("a", { href: "#/workflows", dataset: { nav: "workflows" } }, "Workflows"));
  const header = h("header.topbar",
    h("a.brand", { href: "#/" }, logo(), h("span", "Switchyard")),
    nav,
    h("div.spacer"),
    live,
    h("span.whoami", { title: `Signed in with the token "${session.me.name}"` },
      h("span.who-name", session.me.name), h("span.scope", { class: `scope-${session.me.scope}` }, session.me.scope)),
    h("button.btn.ghost", { type: "button", onclick: () => signOut("Signed out.") }, "Sign out"));
  app.main = h("main.content");
  fill(document.getElementById("app"), header, app.main);
  setLive(stream.status);
  stream.start();
  rates.since = Date.now();
  route();
}

function disposePage() {
  for (const fn of app.disposers.splice(0)) {
    try {
      fn();
    } catch (err) {
      console.error(err);
    }
  }
}

// page-scoped helpers: everything registered here ends when the page does.
const scope = {
  interval(fn, ms) {
    const id = setInterval(fn, ms);
    app.disposers.push(() => clearInterval(id));
  },
  on(fn) {
    app.disposers.push(stream.on(fn));
  },
  add(fn) {
    app.disposers.push(fn);
  },
};

function parseHash() {
  const raw = location.hash.replace(/^#/, "") || "/";
  const [path, qs] = raw.split("?");
  return { path, params: new URLSearchParams(qs || "") };
}

function route() {
  if (!session.me) return;
  disposePage();
  const { path, params } = parseHash();
  let m;
  let section = "overview";
  clear(app.main);
  if (path === "/" || path === "") pageOverview();
  else if (path === "/tasks") (section = "tasks"), pageTasks(params);
  else if ((m = path.match(/^\/tasks\/(\d+)$/))) (section = "tasks"), pageTask(Number(m[1]));
  else if (path === "/workflows") (section = "workflows"), pageWorkflows(params);
  else if ((m = path.match(/^\/executions\/(\d+)$/))) (section = "workflows"), pageExecution(Number(m[1]));
  else app.main.append(h("div.card", h("h2", "Not found"), h("p", "No such page. ", h("a", { href: "#/" }, "Back to the overview"))));
  for (const a of document.querySelectorAll(".nav a")) a.classList.toggle("active", a.dataset.nav === section);
  // Relative times tick.
  scope.interval(() => {
    for (const t of app.main.querySelectorAll("time[data-rel]")) t.textContent = ago(t.getAttribute("datetime"));
  }, 1000);
}

window.addEventListener("hashchange", route);

function pageHeader(title, ...extra) {
  return h("div.page-header", h("h1", title), h("div.spacer"), ...extra);
}

function card(title, ...children) {
  return h("section.card", title ? h("div.card-title", ...[].concat(title)) : null, ...children);
}

function errorBox(err) {
  return h("div.error-box", err instanceof ApiError ? err.message : String(err));
}

// ---------------------------------------------------------------- overview

function pageOverview() {
  const stats = h("div.stats");
  const chartBox = h("div.chart-box");
  const queuesBox = h("div.table-wrap");
  const podsBox = h("div.table-wrap");
  app.main.append(
    pageHeader("Overview"),
    stats,
    card([h("span", "Task outcomes"), h("span.card-sub", "per 5 seconds, from the live event stream: the last 5 minutes, or since you signed in")], chartBox),
    card([h("span", "Queues"), h("span.card-sub", "depth per unfinished state, oldest task")], queuesBox),
    card([h("span", "Pods"), h("span.card-sub", "live workers, their executors and heartbeats")], podsBox));

  let queues = null;
  let workers = null;
  let loadError = null;

  const load = async () => {
    try {
      const [q, w] = await Promise.all([api("GET", "/v1/queues"), api("GET", "/v1/workers")]);
      queues = q.queues;
      workers = w.workers;
      loadError = null;
    } catch (err) {
      loadError = err;
    }
    draw();
  };

  const drawStats = () => {
    const series = rates.series();
    const lastMinute = series.slice(-12);
    const sum = (arr, k) => arr.reduce((n, b) => n + b[k], 0);
    const done = sum(lastMinute, "completed");
    const fiveDone = sum(series, "completed");
    const fiveFailed = sum(series, "failed");
    const fiveRetried = sum(series, "retried");
    const windowSec = Math.min(60, Math.max(1, (Date.now() - rates.since) / 1000));
    const finished = fiveDone + fiveFailed;
    const failRate = finished ? (100 * fiveFailed) / finished : 0;
    let inProgress = 0;
    let queued = 0;
    let oldestQueued = null;
    for (const q of queues || []) {
      inProgress += q.depth.in_progress || 0;
      queued += q.depth.queued || 0;
      const age = q.oldest_age_seconds.queued;
      if (age !== undefined && (oldestQueued === null || age > oldestQueued)) oldestQueued = age;
    }
    let slots = 0;
    let busy = 0;
    for (const w of workers || []) for (const q of w.queues) (slots += q.executor_size), (busy += q.busy);
    const stat = (name, value, sub, cls) => h("div.stat", { class: cls, dataset: { stat: name } },
      h("div.stat-label", name), h("div.stat-value", value), h("div.stat-sub", sub));
    fill(stats,
      stat("Throughput", `${(done / windowSec).toFixed(1)}/s`, `${done} completed in the last minute`, "ok"),
      stat("Failure rate", `${failRate.toFixed(1)}%`, `${fiveFailed} failed, ${fiveRetried} retried (5 min)`, fiveFailed ? "bad" : ""),
      stat("Queued", String(queued), oldestQueued === null ? "none waiting" : `oldest waits ${fmtAge(oldestQueued)}`, oldestQueued > 60 ? "warn" : ""),
      stat("In progress", String(inProgress), `across ${plural((queues || []).length, "queue")}`, ""),
      stat("Saturation", slots ? `${Math.round((100 * busy) / slots)}%` : "–", `${busy} of ${slots} executors busy, ${plural((workers || []).length, "pod")}`, ""));
  };

  const drawChart = () => fill(chartBox, outcomeChart(rates.series()));

  const drawQueues = () => {
    if (loadError && !queues) return fill(queuesBox, errorBox(loadError));
    if (!queues) return;
    if (!queues.length) return fill(queuesBox, h("p.empty", "No queues yet: start a worker or enqueue a task."));
    const maxDepth = Math.max(1, ...queues.map((q) => DEPTH_STATES.reduce((n, st) => n + (q.depth[st] || 0), 0)));
    const rows = queues.map((q) => {
      const total = DEPTH_STATES.reduce((n, st) => n + (q.depth[st] || 0), 0);
      let oldest = null;
      let oldestState = "";
      for (const [st, age] of Object.entries(q.oldest_age_seconds || {})) if (oldest === null || age > oldest) (oldest = age), (oldestState = st);
      const bar = h("div.depth-bar", { title: DEPTH_STATES.map((st) => `${label(st)}: ${q.depth[st] || 0}`).join(", ") });
      for (const st of DEPTH_STATES) {
        const n = q.depth[st] || 0;
        if (n) bar.append(h("span", { class: `seg state-${st}`, style: { width: `${(100 * n) / maxDepth}%` } }));
      }
      const actions = [];
      if (session.can("admin")) {
        actions.push(q.paused
          ? actionButton("Resume", async () => { await api("POST", `/v1/queues/${encodeURIComponent(q.name)}/resume`); toast(`Queue ${q.name} resumed`); load(); }, { kind: "small", name: "resume-queue" })
          : actionButton("Pause", async () => { await api("POST", `/v1/queues/${encodeURIComponent(q.name)}/pause`); toast(`Queue ${q.name} paused`); load(); }, { kind: "small", name: "pause-queue" }));
      }
      return h("tr", { dataset: { queue: q.name } },
        h("td", h("a.strong", { href: `#/tasks${query({ queue: q.name })}` }, q.name), q.paused ? h("span.badge.state-paused", "paused") : null),
        ...DEPTH_STATES.map((st) => h("td.num", { class: q.depth[st] ? "" : "zero", dataset: { depth: st } }, String(q.depth[st] || 0))),
        h("td.bar-cell", bar, h("span.total", String(total))),
        h("td", oldest === null ? h("span.muted", "–") : h("span", { title: `oldest ${label(oldestState)} task` }, fmtAge(oldest), h("span.muted", ` ${label(oldestState)}`))),
        h("td.actions", actions));
    });
    fill(queuesBox, h("table.table",
      h("thead", h("tr", h("th", "Queue"), ...DEPTH_STATES.map((st) => h("th.num", label(st))), h("th", "Depth"), h("th", "Oldest"), h("th", ""))),
      h("tbody", rows)));
  };

  const drawPods = () => {
    if (loadError && !workers) return fill(podsBox, errorBox(loadError));
    if (!workers) return;
    if (!workers.length) return fill(podsBox, h("p.empty", "No live pods: no worker has sent a heartbeat recently."));
    const rows = workers.map((w) => {
      const size = w.queues.reduce((n, q) => n + q.executor_size, 0);
      const busy = w.queues.reduce((n, q) => n + q.busy, 0);
      const sat = size ? busy / size : 0;
      const queuesCell = h("div.pod-queues", w.queues.map((q) => h("div.pod-queue", { title: `${q.busy} of ${q.executor_size} busy` },
        h("span.pq-name", q.name),
        h("span.meter", h("span", { class: q.busy >= q.executor_size ? "full" : "", style: { width: `${q.executor_size ? (100 * q.busy) / q.executor_size : 0}%` } })),
        h("span.pq-num", `${q.busy}/${q.executor_size}`))));
      const hbAge = since(w.heartbeat_at);
      return h("tr", { dataset: { pod: w.id } },
        h("td", h("div.strong", `${w.host}:${w.pid}`), h("div.muted.mono", { title: w.id }, w.id.length > 22 ? `${w.id.slice(0, 22)}…` : w.id)),
        h("td", h("span.mono", w.version)),
        h("td", queuesCell),
        h("td.num", h("span.sat", { class: sat >= 1 ? "full" : sat >= 0.75 ? "high" : "" }, `${Math.round(sat * 100)}%`)),
        h("td", h("span", { class: hbAge > 10 ? "warn-text" : "" }, timeEl(w.heartbeat_at))),
        h("td", timeEl(w.started_at)));
    });
    fill(podsBox, h("table.table",
      h("thead", h("tr", h("th", "Pod"), h("th", "Version"), h("th", "Executors (busy / size)"), h("th.num", "Busy"), h("th", "Heartbeat"), h("th", "Started"))),
      h("tbody", rows)));
  };

  const draw = () => {
    drawStats();
    drawQueues();
    drawPods();
  };

  drawChart();
  draw();
  load();
  const reload = throttle(load, 1000);
  scope.on((m) => {
    if (m.event === "task" || m.event === "resync") reload();
  });
  scope.interval(load, 3000);
  scope.interval(() => {
    drawChart();
    drawStats();
  }, 1000);
  scope.add(() => reload.cancel());
}

// outcomeChart draws stacked bars (completed, retried, failed) per bucket.
function outcomeChart(series) {
  const W = 960;
  const H = 190;
  const padL = 40;
  const padB = 24;
  const padT = 10;
  const innerW = W - padL - 8;
  const innerH = H - padB - padT;
  const max = Math.max(1, ...series.map((b) => b.completed + b.failed + b.retried));
  const nice = niceMax(max);
  const bw = innerW / series.length;
  const svg = s("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart", role: "img", "aria-label": "Task outcomes over the last five minutes" });
  for (let i = 0; i <= 4; i++) {
    const y = padT + innerH - (innerH * i) / 4;
    svg.append(s("line", { x1: padL, x2: W - 8, y1: y, y2: y, class: "grid" }),
      s("text", { x: padL - 6, y: y + 4, class: "axis", "text-anchor": "end" }, String((nice * i) / 4)));
  }
  series.forEach((b, i) => {
    let y = padT + innerH;
    const x = padL + i * bw + 1;
    for (const k of ["completed", "retried", "failed"]) {
      const v = b[k];
      if (!v) continue;
      const hgt = (innerH * v) / nice;
      y -= hgt;
      svg.append(s("rect", { x, y, width: Math.max(1, bw - 2), height: hgt, class: `bar bar-${k}` },
        s("title", `${v} ${k} (${fmtTime(new Date(b.key * BUCKET_MS).toISOString())})`)));
    }
  });
  const span = series.length * (BUCKET_MS / 1000);
  const step = span <= 60 ? 10 : span <= 150 ? 30 : 60;
  for (let t = 0; t <= span; t += step) {
    const x = padL + innerW - (innerW * t) / span;
    const text = t === 0 ? "now" : t < 60 ? `-${t}s` : t % 60 ? `-${Math.floor(t / 60)}m${t % 60}s` : `-${t / 60}m`;
    svg.append(s("text", { x, y: H - 6, class: "axis", "text-anchor": t === 0 ? "end" : x - padL < 24 ? "start" : "middle" }, text));
  }
  const total = series.reduce((n, b) => n + b.completed + b.failed + b.retried, 0);
  const legend = h("div.legend",
    h("span.key.key-completed", "completed"), h("span.key.key-retried", "retried (re-queued after an attempt)"), h("span.key.key-failed", "failed"),
    h("span.muted", total ? "" : `waiting for tasks to finish (watching since ${fmtTime(new Date(rates.since).toISOString())})`),
    rates.missed ? h("span.muted", ` · ${rates.missed} changes arrived only as counts (bulk statements)`) : null);
  return h("div", svg, legend);
}

// niceMax rounds v up to four equal, round, whole steps (4, 8, 20, 40, 80,
// 100, 200, ...), so the axis labels are integers.
function niceMax(v) {
  const step = Math.max(1, v / 4);
  const p = 10 ** Math.floor(Math.log10(step));
  for (const m of p >= 10 ? [1, 2, 2.5, 5, 10] : [1, 2, 5, 10]) if (m * p >= step) return 4 * m * p;
  return 40 * p;
}

// ---------------------------------------------------------------- tasks

function pageTasks(params) {
  const filters = {
    state: params.get("state") || "",
    type: params.get("type") || "",
    queue: params.get("queue") || "",
    tag: params.get("tag") || "",
  };
  const cursor = params.get("cursor") || "";
  const page = Number(params.get("page") || "1");
  const go = (f, extra = {}) => {
    location.hash = `#/tasks${query({ ...f, ...extra })}`;
  };

  const stateSel = h("select", { name: "state", "aria-label": "State", onchange: () => go({ ...filters, state: stateSel.value }) },
    h("option", { value: "" }, "all states"), TASK_STATES.map((st) => h("option", { value: st, selected: st === filters.state }, label(st))));
  const typeSel = h("select", { name: "type", "aria-label": "Type", onchange: () => go({ ...filters, type: typeSel.value }) },
    h("option", { value: "" }, "all types"), filters.type ? h("option", { value: filters.type, selected: true }, filters.type) : null);
  const queueSel = h("select", { name: "queue", "aria-label": "Queue", onchange: () => go({ ...filters, queue: queueSel.value }) },
    h("option", { value: "" }, "all queues"), filters.queue ? h("option", { value: filters.queue, selected: true }, filters.queue) : null);
  const tagInput = h("input", { name: "tag", type: "search", placeholder: "tag", value: filters.tag, "aria-label": "Tag" });
  const idInput = h("input", { name: "id", type: "search", inputmode: "numeric", placeholder: "task id", "aria-label": "Task id" });
  const bar = h("div.filters",
    h("form.inline", { onsubmit: (ev) => { ev.preventDefault(); go({ ...filters, tag: tagInput.value.trim() }); } },
      stateSel, typeSel, queueSel, tagInput, h("button.btn", { type: "submit" }, "Filter"),
      (filters.state || filters.type || filters.queue || filters.tag) ? h("a.btn.ghost", { href: "#/tasks" }, "Clear") : null),
    h("div.spacer"),
    h("form.inline", { onsubmit: (ev) => { ev.preventDefault(); const id = idInput.value.trim().replace(/^#/, ""); if (/^\d+$/.test(id)) location.hash = `#/tasks/${id}`; else toast("A task id is a number", "error"); } },
      idInput, h("button.btn", { type: "submit" }, "Open")));
  const tableBox = h("div.table-wrap");
  const pager = h("div.pager");
  app.main.append(pageHeader("Tasks"), card(null, bar, tableBox, pager));

  // Fill the type and queue choices.
  api("GET", "/v1/task-types").then((r) => {
    for (const t of r.task_types) if (t.name !== filters.type) typeSel.append(h("option", { value: t.name }, t.name));
  }).catch(() => {});
  api("GET", "/v1/queues").then((r) => {
    for (const q of r.queues) if (q.name !== filters.queue) queueSel.append(h("option", { value: q.name }, q.name));
  }).catch(() => {});

  let shown = new Set();
  // Rows whose task did not change are kept (moved, not rebuilt) across
  // reloads, so an armed "Confirm cancel" survives live updates.
  let rowCache = new Map();
  const rowFor = (t) => {
    const key = JSON.stringify([t.id, t.state, t.attempt, t.scheduled_at, t.finalized_at]);
    let row = rowCache.get(key);
    if (!row) row = taskRow(t, load);
    return [key, row];
  };
  const load = async () => {
    let res;
    try {
      res = await api("GET", `/v1/tasks${query({ state: filters.state, type: filters.type, queue: filters.queue, tag: filters.tag, cursor, limit: 50 })}`);
    } catch (err) {
      fill(tableBox, errorBox(err));
      return;
    }
    shown = new Set(res.tasks.map((t) => t.id));
    if (!res.tasks.length) {
      fill(tableBox, h("p.empty", page > 1 ? "No more tasks." : "No tasks match."));
    } else {
      fill(tableBox, h("table.table.tasks",
        h("thead", h("tr", h("th", "ID"), h("th", "Type"), h("th", "Queue"), h("th", "State"), h("th.num", "Attempt"), h("th", "Tags"), h("th", "Created"), h("th", "Scheduled"), h("th", ""))),
        h("tbody", (() => {
          const next = new Map(res.tasks.map(rowFor));
          rowCache = next;
          return [...next.values()];
        })())));
    }
    fill(pager,
      h("span.muted", `Page ${page} · oldest first · ${res.tasks.length} shown`),
      h("div.spacer"),
      page > 1 ? h("button.btn", { type: "button", onclick: () => history.back() }, "← Previous") : null,
      res.next_cursor ? h("button.btn", { type: "button", onclick: () => go(filters, { cursor: res.next_cursor, page: page + 1 }) }, "Next →") : null);
  };
  load();
  const reload = throttle(load, 700);
  scope.on((m) => {
    if (m.event === "resync") return reload();
    if (m.event !== "task") return;
    const e = m.data;
    if (shown.has(e.id)) return reload();
    // A new task matching the filters may belong on this page.
    if ((!filters.type || e.type === filters.type) && (!filters.queue || e.queue === filters.queue) && (!filters.state || e.state === filters.state)) reload();
  });
  scope.interval(load, 15000);
  scope.add(() => reload.cancel());
}

function taskActions(t, after) {
  if (!session.can("write")) return [];
  const out = [];
  if (CANCELLABLE.has(t.state)) {
    out.push(actionButton("Cancel", async () => {
      const r = await api("POST", `/v1/tasks/${t.id}/cancel`);
      toast(`Task ${t.id} ${label(r.state)}`);
      after && after(r);
    }, { confirm: "Confirm cancel", kind: "small danger", name: "cancel" }));
  }
  if (RETRYABLE.has(t.state)) {
    out.push(actionButton("Retry", async () => {
      const r = await api("POST", `/v1/tasks/${t.id}/retry`);
      toast(`Task ${t.id} ${label(r.state)}`);
      after && after(r);
    }, { kind: "small", name: "retry" }));
  }
  return out;
}

function taskRow(t, after) {
  return h("tr", { dataset: { task: t.id, state: t.state } },
    h("td", h("a.strong.mono", { href: `#/tasks/${t.id}` }, `#${t.id}`)),
    h("td", h("span.mono", t.type), t.workflow ? h("a.chip", { href: `#/executions/${t.workflow.execution_id}`, title: "workflow step" }, `⎇ ${t.workflow.step || t.workflow.role}`) : null),
    h("td", t.queue),
    h("td.state", badge(t.state)),
    h("td.num", `${t.attempt}/${t.max_attempts}`),
    h("td", (t.tags || []).map((g) => h("span.tag", g))),
    h("td", timeEl(t.created_at)),
    h("td", timeEl(t.finalized_at ? null : t.scheduled_at)),
    h("td.actions", taskActions(t, after)));
}

function pageTask(id) {
  const box = h("div");
  app.main.append(h("div.crumbs", h("a", { href: "#/tasks" }, "Tasks"), " / ", `#${id}`), box);
  let lastKey = "";
  const load = async () => {
    let t;
    try {
      t = await api("GET", `/v1/tasks/${id}`);
    } catch (err) {
      lastKey = "";
      fill(box, errorBox(err));
      return;
    }
    // Unchanged: keep the page as it is (an armed "Confirm cancel" too).
    const key = JSON.stringify(t);
    if (key === lastKey) return;
    lastKey = key;
    const prop = (k, v) => [h("dt", k), h("dd", v)];
    const errs = (t.errors || []).slice().reverse();
    fill(box,
      h("div.page-header", { dataset: { task: t.id, state: t.state } },
        h("h1", h("span.mono", `#${t.id}`), " ", h("span.mono", t.type)), badge(t.state), h("div.spacer"), h("div.actions", taskActions(t, load))),
      h("div.grid-2",
        card("Details", h("dl.props",
          prop("Queue", h("a", { href: `#/tasks${query({ queue: t.queue })}` }, t.queue)),
          prop("Priority", String(t.priority)),
          prop("Attempt", `${t.attempt} of ${t.max_attempts}`),
          prop("Tags", (t.tags || []).length ? t.tags.map((g) => h("a.tag", { href: `#/tasks${query({ tag: g })}` }, g)) : h("span.muted", "none")),
          prop("Timeout", t.timeout || h("span.muted", "type default")),
          prop("Idempotency key", t.idempotency_key ? h("span.mono", t.idempotency_key) : h("span.muted", "none")),
          prop("Snoozes", String(t.snoozes || 0)),
          t.workflow ? prop("Workflow", h("a", { href: `#/executions/${t.workflow.execution_id}` }, `execution #${t.workflow.execution_id}`, t.workflow.step ? ` · step ${t.workflow.step}` : "", ` (${t.workflow.role})`)) : null)),
        card("Timeline", h("dl.props",
          prop("Created", stamp(t.created_at)),
          prop(t.finalized_at ? "Scheduled" : "Runs", stamp(t.scheduled_at)),
          prop("Attempted", stamp(t.attempted_at)),
          prop("Finalized", stamp(t.finalized_at)),
          t.attempted_at ? prop("Run time", t.finalized_at ? fmtAge(between(t.attempted_at, t.finalized_at)) : `${fmtAge(between(t.attempted_at))} so far`) : null))),
      h("div.grid-2",
        card("Arguments", jsonBlock(t.args, "{}")),
        card("Output", jsonBlock(t.output, t.state === "completed" ? "no output" : "not completed"))),
      card([h("span", "Attempt errors"), h("span.card-sub", `${errs.length} recorded, newest first`)],
        errs.length ? h("ol.errors", errs.map((e) => h("li.attempt-error",
          h("div.err-head", h("span.badge.state-failed", `attempt ${e.attempt}`), h("span.muted", fmtTime(e.at, true))),
          h("pre.err", e.error),
          e.trace ? h("details", h("summary", "stack"), h("pre.trace", e.trace)) : null)))
          : h("p.muted", "No attempt has failed.")));
  };
  load();
  const reload = throttle(load, 500);
  scope.on((m) => {
    if ((m.event === "task" && m.data.id === id) || m.event === "resync") reload();
  });
  scope.interval(load, 10000);
  scope.add(() => reload.cancel());
}

function stamp(iso) {
  if (!iso) return h("span.muted", "–");
  return h("span", h("span.mono", fmtTime(iso, true)), h("span.muted", " · "), timeEl(iso));
}

// ---------------------------------------------------------------- workflows

function progressBar(e) {
  const pct = Math.round((e.progress || 0) * 100);
  return h("div.progress", { title: `${e.steps_final} of ${e.steps_total} steps final` },
    h("div.progress-track", h("div.progress-fill", { class: `exec-${e.status}`, style: { width: `${pct}%` } })),
    h("span.progress-text", `${e.steps_final}/${e.steps_total}`));
}

function pageWorkflows(params) {
  const status = params.get("status") || "";
  const name = params.get("name") || "";
  const cursor = params.get("cursor") || "";
  const page = Number(params.get("page") || "1");
  const go = (f, extra = {}) => {
    location.hash = `#/workflows${query({ ...f, ...extra })}`;
  };
  const statusSel = h("select", { name: "status", "aria-label": "Status", onchange: () => go({ status: statusSel.value, name }) },
    h("option", { value: "" }, "all statuses"), EXEC_STATUSES.map((st) => h("option", { value: st, selected: st === status }, label(st))));
  const nameInput = h("input", { name: "name", type: "search", placeholder: "workflow name", value: name, "aria-label": "Workflow name" });
  const tableBox = h("div.table-wrap");
  const pager = h("div.pager");
  app.main.append(pageHeader("Workflows"), card(null,
    h("div.filters", h("form.inline", { onsubmit: (ev) => { ev.preventDefault(); go({ status, name: nameInput.value.trim() }); } },
      statusSel, nameInput, h("button.btn", { type: "submit" }, "Filter"), (status || name) ? h("a.btn.ghost", { href: "#/workflows" }, "Clear") : null)),
    tableBox, pager));

  let shown = new Set();
  const load = async () => {
    let res;
    try {
      res = await api("GET", `/v1/executions${query({ status, name, cursor, limit: 50 })}`);
    } catch (err) {
      fill(tableBox, errorBox(err));
      return;
    }
    shown = new Set(res.executions.map((e) => e.id));
    if (!res.executions.length) {
      fill(tableBox, h("p.empty", "No executions match. Start one with POST /v1/workflows or `switchyard workflow start`."));
    } else {
      fill(tableBox, h("table.table.executions",
        h("thead", h("tr", h("th", "ID"), h("th", "Name"), h("th", "Status"), h("th", "Progress"), h("th", "Started"), h("th", "Duration"), h("th", "Parent"))),
        h("tbody", res.executions.map((e) => h("tr", { dataset: { execution: e.id, status: e.status } },
          h("td", h("a.strong.mono", { href: `#/executions/${e.id}` }, `#${e.id}`)),
          h("td", h("a", { href: `#/executions/${e.id}` }, e.name)),
          h("td.status", badge(e.status, "exec")),
          h("td", progressBar(e)),
          h("td", timeEl(e.created_at)),
          h("td", fmtAge(between(e.created_at, e.finished_at))),
          h("td", e.parent_id ? h("a.mono", { href: `#/executions/${e.parent_id}` }, `#${e.parent_id}`) : h("span.muted", "–")))))));
    }
    fill(pager, h("span.muted", `Page ${page} · ${res.executions.length} shown`), h("div.spacer"),
      page > 1 ? h("button.btn", { type: "button", onclick: () => history.back() }, "← Previous") : null,
      res.next_cursor ? h("button.btn", { type: "button", onclick: () => go({ status, name }, { cursor: res.next_cursor, page: page + 1 }) }, "Next →") : null);
  };
  load();
  const reload = throttle(load, 700);
  scope.on((m) => {
    if (m.event === "resync") reload();
    else if (m.event === "execution" && (shown.has(m.data.execution_id) || m.data.type === "execution_started")) reload();
  });
  scope.interval(load, 10000);
  scope.add(() => reload.cancel());
}

// layoutDag places steps in columns by their longest chain of dependencies
// (topological levels), orders each column by the average row of its
// dependencies (a few barycentre sweeps to keep edges short and uncrossed),
// and centres the columns vertically.
function layoutDag(steps) {
  const byKey = new Map(steps.map((st) => [st.key, st]));
  const level = new Map();
  const visiting = new Set();
  const levelOf = (key) => {
    if (level.has(key)) return level.get(key);
    if (visiting.has(key)) return 0; // a cycle cannot be stored; be safe
    visiting.add(key);
    const st = byKey.get(key);
    const deps = ((st && st.depends_on) || []).filter((d) => byKey.has(d));
    const l = deps.length ? 1 + Math.max(...deps.map(levelOf)) : 0;
    visiting.delete(key);
    level.set(key, l);
    return l;
  };
  steps.forEach((st) => levelOf(st.key));
  const columns = [];
  steps.forEach((st) => (columns[level.get(st.key)] ||= []).push(st.key));
  const children = new Map(steps.map((st) => [st.key, []]));
  steps.forEach((st) => (st.depends_on || []).forEach((d) => children.has(d) && children.get(d).push(st.key)));
  const rowOf = new Map();
  const index = () => columns.forEach((col) => col.forEach((k, i) => rowOf.set(k, i - (col.length - 1) / 2)));
  index();
  const bary = (keys) => (keys.length ? keys.reduce((n, k) => n + rowOf.get(k), 0) / keys.length : null);
  for (let sweep = 0; sweep < 4; sweep++) {
    const down = sweep % 2 === 0;
    const order = down ? columns.slice(1) : columns.slice(0, -1).reverse();
    for (const col of order) {
      const weight = new Map(col.map((k, i) => {
        const b = bary(down ? (byKey.get(k).depends_on || []).filter((d) => rowOf.has(d)) : children.get(k));
        return [k, b === null ? i - (col.length - 1) / 2 : b];
      }));
      col.sort((a, b) => weight.get(a) - weight.get(b));
      col.forEach((k, i) => rowOf.set(k, i - (col.length - 1) / 2));
    }
  }
  const NODE_W = 166;
  const NODE_H = 54;
  const GAP_X = 46;
  const GAP_Y = 22;
  const maxRows = Math.max(...columns.map((c) => c.length));
  const height = maxRows * (NODE_H + GAP_Y) - GAP_Y;
  const pos = new Map();
  columns.forEach((col, ci) => {
    const colH = col.length * (NODE_H + GAP_Y) - GAP_Y;
    col.forEach((k, ri) => pos.set(k, { x: ci * (NODE_W + GAP_X), y: (height - colH) / 2 + ri * (NODE_H + GAP_Y) }));
  });
  return { pos, width: columns.length * (NODE_W + GAP_X) - GAP_X, height, NODE_W, NODE_H };
}

function shorten(text, max) {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

const KIND_LABEL = { task: "task", delay: "delay", wait: "wait", workflow: "child workflow" };

// Dag draws an execution's steps as an SVG graph and updates it in place.
class Dag {
  constructor(steps, onSelect) {
    this.onSelect = onSelect;
    this.layout = layoutDag(steps);
    const { pos, width, height, NODE_W, NODE_H } = this.layout;
    const M = 16;
    this.svg = s("svg", {
      class: "dag", viewBox: `${-M} ${-M} ${width + 2 * M} ${height + 2 * M}`,
      width: width + 2 * M, height: height + 2 * M, role: "img", "aria-label": "Workflow steps and their dependencies",
    });
    const defs = s("defs");
    for (const kind of ["default", "done"]) {
      defs.append(s("marker", { id: `arrow-${kind}`, viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" },
        s("path", { d: "M0,0 L10,5 L0,10 z", class: `arrow arrow-${kind}` })));
    }
    this.svg.append(defs);
    const edges = s("g", { class: "edges" });
    const nodes = s("g", { class: "nodes" });
    this.svg.append(edges, nodes);
    this.nodes = new Map();
    this.edges = [];
    for (const st of steps) {
      for (const d of st.depends_on || []) {
        const a = pos.get(d);
        const b = pos.get(st.key);
        if (!a || !b) continue;
        const x1 = a.x + NODE_W;
        const y1 = a.y + NODE_H / 2;
        const x2 = b.x - 2;
        const y2 = b.y + NODE_H / 2;
        const dx = Math.max(24, (x2 - x1) / 2);
        const path = s("path", { class: "edge", d: `M${x1},${y1} C${x1 + dx},${y1} ${x2 - dx},${y2} ${x2},${y2}`, "data-from": d, "data-to": st.key });
        edges.append(path);
        this.edges.push({ from: d, to: st.key, path });
      }
    }
    for (const st of steps) {
      const p = pos.get(st.key);
      const g = s("g", { class: "node", transform: `translate(${p.x},${p.y})`, "data-step": st.key, tabindex: 0, role: "button" });
      const title = s("title");
      const rect = s("rect", { width: NODE_W, height: NODE_H, rx: 9 });
      const stripe = s("rect", { class: "stripe", width: 5, height: NODE_H - 16, x: 8, y: 8, rx: 2.5 });
      const key = s("text", { x: 22, y: 22, class: "node-key" }, shorten(st.key, 18));
      const meta = s("text", { x: 22, y: 40, class: "node-meta" });
      const icon = s("text", { x: NODE_W - 12, y: 22, class: "node-icon", "text-anchor": "end" });
      g.append(title, rect, stripe, key, meta, icon);
      g.addEventListener("click", () => this.onSelect(st.key));
      g.addEventListener("keydown", (ev) => (ev.key === "Enter" || ev.key === " ") && this.onSelect(st.key));
      nodes.append(g);
      this.nodes.set(st.key, { g, title, meta, icon });
    }
    this.update(steps);
  }

  update(steps, selected) {
    const status = new Map(steps.map((st) => [st.key, st.status]));
    for (const st of steps) {
      const n = this.nodes.get(st.key);
      if (!n) continue;
      n.g.setAttribute("class", `node status-${st.status}${st.optional ? " optional" : ""}${st.key === selected ? " selected" : ""}`);
      n.g.dataset.status = st.status;
      let meta = `${KIND_LABEL[st.kind] || st.kind} · ${label(st.status)}`;
      if (st.kind === "task" && st.attempt > 1) meta += ` · try ${st.attempt}`;
      n.meta.textContent = meta;
      n.icon.textContent = { completed: "✓", failed: "✕", running: "▶", waiting: "…", skipped: "–", cancelled: "⊘" }[st.status] || "";
      n.title.textContent = `${st.key} (${st.kind}${st.optional ? ", optional" : ""}): ${label(st.status)}${st.error ? ` — ${st.error}` : ""}`;
    }
    for (const e of this.edges) {
      const from = status.get(e.from);
      const done = from === "completed" || from === "skipped";
      const active = done && ["running", "waiting", "ready"].includes(status.get(e.to));
      e.path.setAttribute("class", `edge from-${from}${done ? " done" : ""}${active ? " active" : ""}`);
      e.path.setAttribute("marker-end", `url(#arrow-${done ? "done" : "default"})`);
    }
  }
}

function pageExecution(id) {
  const head = h("div");
  const dagBox = h("div.dag-wrap");
  const stepBox = h("div");
  const stepsTable = h("div.table-wrap");
  const historyBox = h("ol.timeline");
  const signalBox = h("div");
  const infoBox = h("div");
  app.main.append(
    h("div.crumbs", h("a", { href: "#/workflows" }, "Workflows"), " / ", `#${id}`),
    head, signalBox,
    card([h("span", "Graph"), h("span.card-sub", "columns follow depends_on; click a step for its details"), h("div.spacer"), dagLegend()], dagBox, stepBox),
    h("div.grid-2",
      card("Steps", stepsTable),
      card([h("span", "History"), h("span.card-sub", "oldest first")], h("div.timeline-wrap", historyBox))),
    infoBox);

  let exec = null;
  let dag = null;
  let selected = null;
  let lastEvent = 0;
  let events = [];
  const signalNames = new Map(); // waiting step -> signal name, from step_waiting events

  const drawStep = () => {
    clear(stepBox);
    const st = exec && exec.steps.find((x) => x.key === selected);
    if (!st) return;
    const prop = (k, v) => [h("dt", k), h("dd", v)];
    stepBox.append(h("div.step-detail", { dataset: { step: st.key } },
      h("div.step-detail-head", h("h3", st.key), badge(st.status, "step"), st.optional ? h("span.chip", "optional") : null,
        h("div.spacer"), h("button.btn.ghost.small", { type: "button", onclick: () => { selected = null; draw(); } }, "Close")),
      h("div.grid-2",
        h("dl.props",
          prop("Kind", KIND_LABEL[st.kind] || st.kind),
          prop("Depends on", (st.depends_on || []).length ? st.depends_on.join(", ") : h("span.muted", "nothing")),
          prop("Attempt", String(st.attempt || 0)),
          st.task_id ? prop("Task", h("a.mono", { href: `#/tasks/${st.task_id}` }, `#${st.task_id}`)) : null,
          st.child_execution_id ? prop("Child execution", h("a.mono", { href: `#/executions/${st.child_execution_id}` }, `#${st.child_execution_id}`)) : null,
          signalNames.has(st.key) ? prop("Waits for signal", h("span.mono", signalNames.get(st.key))) : null,
          prop("Started", stamp(st.started_at)),
          prop("Finished", stamp(st.finished_at)),
          st.started_at ? prop("Duration", fmtAge(between(st.started_at, st.finished_at))) : null),
        h("div", h("div.sub-title", "Output"), jsonBlock(st.output, "no output"),
          st.error ? [h("div.sub-title", "Error"), h("pre.err", st.error)] : null))));
  };

  // The header is rebuilt only when what it shows changes, so an armed
  // "Confirm cancel" survives live updates; the running time ticks alone.
  let headKey = "";
  const runningFor = () => (exec.finished_at ? `took ${fmtAge(between(exec.created_at, exec.finished_at))}` : `running for ${fmtAge(between(exec.created_at))}`);
  const drawHead = () => {
    const key = JSON.stringify([exec.status, exec.steps_final, exec.steps_total, exec.error, exec.finished_at]);
    if (key === headKey) {
      const t = head.querySelector("[data-running-for]");
      if (t) t.textContent = runningFor();
      return;
    }
    headKey = key;
    const acts = [];
    if (session.can("write")) {
      const act = (text, path, opts = {}) => actionButton(text, async () => {
        const r = await api("POST", `/v1/executions/${id}/${path}`);
        toast(`Execution #${id} ${label(r.status)}`);
        exec = { ...exec, ...r, steps: r.steps || exec.steps };
        headKey = "";
        load();
      }, { name: path, ...opts });
      if (exec.status === "running" || exec.status === "pending") acts.push(act("Pause", "pause"));
      if (exec.status === "paused") acts.push(act("Resume", "resume", { kind: "primary" }));
      if (!EXEC_FINAL.has(exec.status)) acts.push(act("Cancel", "cancel", { confirm: "Confirm cancel", kind: "danger" }));
      if (["failed", "cancelled", "timed_out"].includes(exec.status)) acts.push(act("Retry", "retry", { kind: "primary" }));
    }
    fill(head,
      h("div.page-header", { dataset: { execution: exec.id, status: exec.status } },
        h("h1", exec.name, " ", h("span.muted.mono", `#${exec.id}`)), badge(exec.status, "exec"), h("div.spacer"), h("div.actions", acts)),
      h("div.exec-summary",
        progressBar(exec),
        h("span", "started ", timeEl(exec.created_at)),
        h("span", { dataset: { runningFor: "1" } }, runningFor()),
        exec.timeout ? h("span", `timeout ${exec.timeout}`) : null,
        exec.parent_id ? h("span", "child of ", h("a", { href: `#/executions/${exec.parent_id}` }, `#${exec.parent_id}`), exec.parent_step ? ` (step ${exec.parent_step})` : "") : null),
      exec.error ? h("div.error-box", exec.error) : null);
  };

  const drawSignal = () => {
    if (!session.can("write") || EXEC_FINAL.has(exec.status)) {
      delete signalBox.dataset.filled;
      clear(signalBox);
      return;
    }
    const waiting = exec.steps.filter((st) => st.kind === "wait" && st.status === "waiting");
    const suggestion = waiting.map((st) => signalNames.get(st.key)).find(Boolean) || "";
    const waitingKeys = waiting.map((st) => st.key).join(", ");
    // Keep what the user is typing unless what waits changed.
    if (signalBox.dataset.filled && signalBox.dataset.suggestion === suggestion && signalBox.dataset.waiting === waitingKeys) return;
    clear(signalBox);
    signalBox.dataset.waiting = waitingKeys;
    const nameInput = h("input", { name: "signal", placeholder: "signal name", value: suggestion, required: true, "aria-label": "Signal name" });
    const payload = h("input.grow", { name: "payload", placeholder: 'payload JSON (optional), e.g. {"by":"alice"}', "aria-label": "Signal payload" });
    const form = h("form.inline.signal-form", { onsubmit: (ev) => ev.preventDefault() },
      h("span.sub-title", "Signal"), nameInput, payload,
      actionButton("Send signal", async () => {
        let body = {};
        if (payload.value.trim()) {
          try {
            body = { payload: JSON.parse(payload.value) };
          } catch {
            throw new Error("the payload is not valid JSON");
          }
        }
        if (!nameInput.value.trim()) throw new Error("name the signal");
        const r = await api("POST", `/v1/executions/${id}/signals/${encodeURIComponent(nameInput.value.trim())}`, body);
        toast(r.consumed_by ? `Signal delivered to step ${r.consumed_by}` : r.duplicate ? "Signal already sent" : "Signal kept until a step waits for it");
        payload.value = "";
        load();
      }, { kind: "primary", name: "signal" }),
      waiting.length ? h("span.muted", `waiting: ${waiting.map((st) => st.key).join(", ")}`) : null);
    signalBox.dataset.filled = "1";
    signalBox.dataset.suggestion = suggestion;
    signalBox.append(card(null, form));
  };

  const drawSteps = () => {
    fill(stepsTable, h("table.table.steps",
      h("thead", h("tr", h("th", "Step"), h("th", "Kind"), h("th", "Status"), h("th.num", "Try"), h("th", "Duration"), h("th", "Output"))),
      h("tbody", exec.steps.map((st) => h("tr", { dataset: { step: st.key }, class: st.key === selected ? "selected" : "", onclick: () => { selected = st.key; draw(); } },
        h("td", h("span.strong", st.key), st.optional ? h("span.chip", "optional") : null),
        h("td", KIND_LABEL[st.kind] || st.kind),
        h("td", badge(st.status, "step")),
        h("td.num", st.kind === "task" ? String(st.attempt || 0) : ""),
        h("td", st.started_at ? fmtAge(between(st.started_at, st.finished_at)) : h("span.muted", "–")),
        h("td.output-cell", st.output !== undefined ? h("code", shorten(JSON.stringify(st.output), 60)) : st.error ? h("span.err-text", shorten(st.error, 60)) : h("span.muted", "–")))))));
  };

  const drawHistory = () => {
    clear(historyBox);
    for (const ev of events) {
      let data = "";
      if (ev.data !== undefined && ev.data !== null) data = shorten(JSON.stringify(ev.data), 120);
      historyBox.append(h("li", { class: `ev-${ev.type.split("_").pop()}`, dataset: { event: ev.type } },
        h("span.ev-time.mono", fmtTime(ev.at, true)),
        h("span.ev-type", label(ev.type)),
        ev.step ? h("a.ev-step", { href: "#", onclick: (e) => { e.preventDefault(); selected = ev.step; draw(); } }, ev.step) : null,
        data ? h("code.ev-data", data) : null));
    }
    const wrap = historyBox.parentElement;
    if (wrap) wrap.scrollTop = wrap.scrollHeight;
  };

  const drawInfo = () => {
    fill(infoBox, card("Input", jsonBlock(exec.input, "{}")));
  };

  const draw = () => {
    if (!exec) return;
    drawHead();
    drawSignal();
    if (!dag || dag.nodes.size !== exec.steps.length) {
      dag = new Dag(exec.steps, (key) => {
        selected = selected === key ? null : key;
        draw();
      });
      fill(dagBox, dag.svg);
    }
    dag.update(exec.steps, selected);
    drawStep();
    drawSteps();
  };

  const loadHistory = async () => {
    const res = await api("GET", `/v1/executions/${id}/history${query({ after: lastEvent, limit: 5000 })}`);
    if (!res.events.length) return;
    for (const ev of res.events) {
      if (ev.type === "step_waiting" && ev.data && ev.data.signal) signalNames.set(ev.step, ev.data.signal);
      lastEvent = Math.max(lastEvent, ev.id);
    }
    events = events.concat(res.events);
    drawHistory();
  };

  const load = async () => {
    try {
      const [e] = await Promise.all([api("GET", `/v1/executions/${id}`), loadHistory()]);
      exec = e;
      exec.steps ||= [];
      draw();
      drawInfo();
    } catch (err) {
      if (!exec) fill(head, errorBox(err));
      else failed(err);
    }
  };
  load();
  const reload = throttle(load, 250);
  const taskIds = () => new Set((exec ? exec.steps : []).map((st) => st.task_id).filter(Boolean));
  scope.on((m) => {
    if (m.event === "resync") reload();
    else if (m.event === "execution" && m.data.execution_id === id) reload();
    else if (m.event === "task" && taskIds().has(m.data.id)) reload();
  });
  scope.interval(() => {
    if (exec && !EXEC_FINAL.has(exec.status)) load();
  }, 10000);
  scope.interval(() => exec && drawHead(), 1000);
  scope.add(() => reload.cancel());
}

function dagLegend() {
  return h("div.dag-legend", ["pending", "ready", "running", "waiting", "completed", "failed", "skipped", "cancelled"].map((st) => h("span.lg", { class: `status-${st}` }, h("i"), label(st))));
}

// ---------------------------------------------------------------- start

async function start() {
  if (!session.token) return renderSignIn();
  try {
    await signIn(session.token);
  } catch (err) {
    renderSignIn(err.status === 401 ? "Your session's token is no longer accepted; sign in again." : `Could not reach the API: ${err.message}`);
  }
}

start();

// For the browser tests and the curious.
window.switchyard = { session, stream, rates, layoutDag, STEP_STATUSES };
