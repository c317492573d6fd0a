// The Hub's operator page: a read-only view over /api/v1 (jobs, versions,
// assignments with their observed state, checkpoints, agents, audit).
// Everything is rendered with DOM calls and textContent, never innerHTML,
// so nothing a job spec or an Agent sends can become markup. The bearer
// token lives in sessionStorage: it is gone when the tab closes.
"use strict";

const API = "/api/v1";
const TOKEN_KEY = "arkflow.hub.token";
const REFRESH_MS = 2000;

let rendering = false;
// refused is set when the Hub refused the request for want of a token;
// the page then stops polling (each refusal is an audit row) until the
// user signs in.
let refused = false;

function token() {
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

// ApiError is a failed request: the Hub's envelope (code, message,
// correlation id) or the transport's error.
class ApiError extends Error {
  constructor(status, body) {
    super((body && body.message) || "HTTP " + status);
    this.status = status;
    this.code = (body && body.code) || "";
    this.correlation = (body && body.correlation_id) || "";
  }
}

async function get(path) {
  const headers = { Accept: "application/json" };
  if (token()) headers.Authorization = "Bearer " + token();
  const resp = await fetch(API + path, { headers, cache: "no-store" });
  let body = null;
  try {
    body = await resp.json();
  } catch (_) {
    body = null;
  }
  if (!resp.ok) throw new ApiError(resp.status, body);
  return body;
}

// el builds an element: attrs are attributes ("class", "data-*", …),
// children are nodes or strings (as text).
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== undefined && v !== null && v !== false) e.setAttribute(k, String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function stateCell(state, cls) {
  const s = state || "unknown";
  return el("td", { class: (cls ? cls + " " : "") + "state state-" + s.replace(/[^a-z_]/gi, "_"), "data-state": s }, s);
}

function when(ms) {
  if (!ms) return "";
  const d = new Date(ms);
  return d.toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}

function ago(ms) {
  if (!ms) return "";
  const s = Math.round((Date.now() - ms) / 1000);
  if (s < 0) return "in " + -s + " s";
  if (s < 120) return s + " s ago";
  if (s < 7200) return Math.round(s / 60) + " min ago";
  return Math.round(s / 3600) + " h ago";
}

function short(s, n) {
  s = s || "";
  return s.length > n ? s.slice(0, n) + "…" : s;
}

function table(id, columns, rows, emptyText) {
  const head = el("tr", {}, columns.map((c) => el("th", {}, c)));
  const body = el("tbody", {}, rows);
  if (rows.length === 0) body.append(el("tr", {}, el("td", { class: "empty", colspan: columns.length }, emptyText)));
  return el("table", { id }, el("thead", {}, head), body);
}

function jobLink(id) {
  return el("a", { href: "#/jobs/" + encodeURIComponent(id) }, id);
}

function auditRows(items) {
  return items.map((a) =>
    el("tr", { "data-audit": a.event_id },
      el("td", { class: "mono" }, when(a.occurred_at_ms)),
      el("td", {}, a.actor),
      el("td", {}, a.action),
      el("td", {}, (a.resource_type ? a.resource_type + " " : "") + (a.resource_id || "")),
      stateCell(a.outcome),
      el("td", {}, a.failure_code || ""),
      el("td", {}, a.message),
      el("td", { class: "mono" }, short(a.correlation_id, 12)),
    ));
}

const AUDIT_COLUMNS = ["time", "actor", "action", "resource", "outcome", "code", "message", "correlation"];

async function overview() {
  const [jobs, nodes] = await Promise.all([get("/jobs"), get("/nodes?page_size=100")]);
  let audit = null;
  let auditError = "";
  try {
    audit = await get("/audit?page_size=20");
  } catch (e) {
    if (e.status === 401 || e.status === 403) auditError = "This token may not read the audit log.";
    else throw e;
  }
  const jobRows = jobs.map((j) =>
    el("tr", { "data-job": j.job_id },
      el("td", {}, jobLink(j.job_id)),
      el("td", { class: "num" }, j.version),
      stateCell(j.desired_state, "desired"),
      stateCell(j.observed_state, "observed"),
      stateCell(j.convergence, "convergence"),
      el("td", { class: "num" }, j.generation),
      el("td", { class: "nodes" }, (j.node_ids || []).join(", ")),
      el("td", {}, j.last_error || ""),
      el("td", { class: "mono" }, when(j.updated_at_ms)),
    ));
  const nodeRows = nodes.items.map((n) =>
    el("tr", { "data-node": n.id },
      el("td", { class: "mono" }, n.id),
      stateCell(n.state, "node-state"),
      el("td", {}, n.maintenance_state),
      el("td", { class: "num jobs" }, n.streams_running + " / " + n.streams_total),
      el("td", { class: "num" }, n.streams_failed),
      el("td", {}, n.version),
      el("td", {}, (n.capabilities || []).join(", ")),
      el("td", { class: "mono", title: n.boot_id || "" }, short(n.boot_id, 8)),
      el("td", {}, ago(n.last_seen_at_ms)),
      el("td", {}, ago(n.lease_expires_at_ms)),
    ));
  const parts = [
    el("h2", {}, "Jobs (" + jobs.length + ")"),
    table("jobs", ["job", "version", "desired", "observed", "convergence", "generation", "agents", "last error", "updated"], jobRows, "No jobs yet: submit one with POST /api/v1/jobs."),
    el("h2", {}, "Agents (" + nodes.total + ")"),
    table("agents", ["agent", "state", "maintenance", "jobs running", "failed", "version", "capabilities", "boot", "last seen", "lease ends"], nodeRows, "No Agent has registered."),
  ];
  if (nodes.total > nodes.items.length) parts.push(el("p", { class: "muted" }, "Showing the first " + nodes.items.length + " of " + nodes.total + " Agents."));
  parts.push(el("h2", {}, "Audit"));
  parts.push(audit ? table("audit", AUDIT_COLUMNS, auditRows(audit.items), "Nothing audited yet.") : el("p", { class: "muted" }, auditError));
  return parts;
}

async function jobView(id) {
  const enc = encodeURIComponent(id);
  const [detail, versions] = await Promise.all([get("/jobs/" + enc + "/detail"), get("/jobs/" + enc + "/versions")]);
  let audit = null;
  try {
    audit = await get("/audit?page_size=20&resource_id=" + enc);
  } catch (e) {
    if (!(e.status === 401 || e.status === 403)) throw e;
  }
  const j = detail.job;
  const health = detail.checkpoint_health;
  const summary = el("dl", { class: "summary", id: "job-summary", "data-job": j.job_id },
    el("dt", {}, "desired"), el("dd", { class: "desired state state-" + j.desired_state }, j.desired_state),
    el("dt", {}, "observed"), el("dd", { class: "observed state state-" + j.observed_state, "data-state": j.observed_state }, j.observed_state),
    el("dt", {}, "convergence"), el("dd", { class: "state state-" + j.convergence }, j.convergence),
    el("dt", {}, "generation"), el("dd", {}, j.generation),
    el("dt", {}, "version"), el("dd", {}, j.version + (j.digest ? " (" + short(j.digest, 16) + ")" : "")),
    el("dt", {}, "agents"), el("dd", {}, (j.node_ids || []).join(", ") || "none"),
    el("dt", {}, "checkpoint"), el("dd", {}, j.checkpoint_id || "none"),
    health ? [el("dt", {}, "checkpoint health"), el("dd", { class: "state state-" + health.state }, health.state +
      (health.consecutive_failures ? ", " + health.consecutive_failures + " failed in a row" : "") + (health.last_error ? ": " + health.last_error : ""))] : [],
    j.last_error ? [el("dt", {}, "last error"), el("dd", { class: "state state-failed" }, j.last_error)] : [],
  );
  // The tasks each Agent runs: one attempt per plan task (every task of
  // the plan for an Agent that runs the job whole).
  const tasksOf = {};
  for (const t of detail.tasks || []) {
    (tasksOf[t.node_id] = tasksOf[t.node_id] || []).push(t.task_id);
  }
  const assignRows = (detail.assignments || []).map((a) =>
    el("tr", { "data-node": a.node_id },
      el("td", { class: "mono" }, a.node_id),
      el("td", { class: "mono tasks" }, (tasksOf[a.node_id] || ["whole job"]).join(" ")),
      el("td", { class: "mono partitions" }, Object.entries(a.partitions || {}).map(([t, ps]) => t + ": " + ps.join(", ")).join("; ")),
      el("td", { class: "num" }, a.generation),
      el("td", {}, a.action),
      stateCell(a.state, "assignment-state"),
      el("td", { class: "num" }, a.recovery_progress === undefined ? "" : a.recovery_progress + " %"),
      el("td", { class: "mono", title: a.command_id || "" }, short(a.command_id, 28)),
      el("td", {}, (a.failure_class ? a.failure_class + ": " : "") + (a.error || "")),
    ));
  const versionRows = versions.map((v) =>
    el("tr", { "data-version": v.version },
      el("td", { class: "num" }, v.version),
      el("td", { class: "mono", title: v.digest || "" }, short(v.digest, 16)),
      el("td", { class: "mono" }, when(v.created_at_ms)),
      el("td", {}, v.version === j.version ? "current" : ""),
    ));
  const cpRows = (detail.checkpoints || []).map((c) =>
    el("tr", { "data-checkpoint": c.checkpoint_id },
      el("td", { class: "mono" }, c.checkpoint_id),
      el("td", {}, c.kind),
      el("td", {}, c.name || ""),
      stateCell(c.status),
      el("td", { class: "num" }, c.generation || ""),
      el("td", { class: "num" }, c.job_version),
      el("td", { class: "mono" }, when(c.created_at_ms)),
      el("td", {}, c.error || ""),
    ));
  const opRows = (detail.operations || []).map((o) =>
    el("tr", { "data-operation": o.id },
      el("td", { class: "mono", title: o.id }, short(o.id, 28)),
      el("td", {}, o.operation),
      el("td", { class: "mono" }, o.node_id),
      el("td", { class: "num" }, o.generation),
      stateCell(o.state),
      el("td", { class: "num" }, o.progress + " %"),
      el("td", { class: "num" }, o.retry_count),
      el("td", { class: "mono" }, when(o.created_at_ms)),
      el("td", {}, (o.failure_class ? o.failure_class + ": " : "") + (o.error || "")),
    ));
  return [
    el("p", {}, el("a", { href: "#/" }, "← all jobs")),
    el("h2", { id: "job-title" }, "Job " + j.job_id),
    summary,
    el("h2", {}, "Assignments"),
    table("assignments", ["agent", "tasks", "partitions read", "generation", "action", "state", "recovery", "command", "error"], assignRows, "No assignment for this generation."),
    el("h2", {}, "Versions"),
    table("versions", ["version", "digest", "created", ""], versionRows, "No versions."),
    el("h2", {}, "Checkpoints and savepoints"),
    table("checkpoints", ["id", "kind", "name", "status", "generation", "version", "created", "error"], cpRows, "No checkpoint recorded by the Hub yet."),
    el("h2", {}, "Operations (this generation)"),
    table("operations", ["id", "operation", "agent", "generation", "state", "progress", "retries", "created", "error"], opRows, "No operations."),
    el("h2", {}, "Audit"),
    audit ? table("audit", AUDIT_COLUMNS, auditRows(audit.items), "Nothing audited for this job.") : el("p", { class: "muted" }, "This token may not read the audit log."),
  ];
}

function showError(e) {
  const box = document.getElementById("error");
  if (!e) {
    box.hidden = true;
    box.textContent = "";
    return;
  }
  box.hidden = false;
  box.textContent = (e.code ? e.code + ": " : "") + e.message + (e.correlation ? " (correlation id " + e.correlation + ")" : "");
}

function signedIn(yes) {
  document.getElementById("signin").hidden = yes;
  document.getElementById("signout").hidden = !yes || !token();
}

async function health() {
  const pill = document.getElementById("health");
  try {
    const resp = await fetch("/health", { cache: "no-store" });
    const h = await resp.json();
    pill.textContent = h.status + (h.nodes !== undefined ? " · " + h.nodes + " nodes" : "");
    pill.className = "pill state-" + h.status;
  } catch (_) {
    pill.textContent = "unreachable";
    pill.className = "pill state-failed";
  }
}

async function render() {
  if (rendering) return;
  rendering = true;
  try {
    health();
    const m = location.hash.match(/^#\/jobs\/(.+)$/);
    const parts = m ? await jobView(decodeURIComponent(m[1])) : await overview();
    document.getElementById("view").replaceChildren(...parts);
    document.getElementById("updated").textContent = "updated " + new Date().toLocaleTimeString();
    document.body.dataset.loaded = "true";
    refused = false;
    signedIn(true);
    showError(null);
  } catch (e) {
    if (e.status === 401) {
      refused = true;
      signedIn(false);
      document.getElementById("view").replaceChildren(el("p", { class: "muted" }, token() ? "The Hub refused this token." : "Sign in with an operator token (any role) to see the Hub."));
      showError(token() ? e : null);
    } else {
      showError(e);
    }
  } finally {
    rendering = false;
  }
}

function start() {
  document.getElementById("signin").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const input = document.getElementById("token");
    sessionStorage.setItem(TOKEN_KEY, input.value.trim());
    input.value = "";
    render();
  });
  document.getElementById("signout").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    render();
  });
  window.addEventListener("hashchange", render);
  render();
  setInterval(() => {
    if (!refused) render();
  }, REFRESH_MS);
}

document.addEventListener("DOMContentLoaded", start);
