// The sessions list: newest first, paged with `before`, filtered by agent and
// status, polled while on screen; a row is rebuilt only when its session changed
// (a new event changes its last_activity_at), and every poll renews "… ago".

import { api } from "./api.js";
import { el, clear, shortId, when, time } from "./dom.js";

const PAGE = 25;
const POLL_MS = 2000;
const STATUSES = ["", "idle", "running", "awaiting_input", "ended"];

let agentNames = null; // from /openapi.json (open), once per page load

async function agents() {
  if (agentNames) return agentNames;
  try {
    const doc = await (await fetch("/openapi.json")).json();
    agentNames = doc.components.schemas.CreateSession.properties.agent.enum || [];
  } catch {
    agentNames = [];
  }
  return agentNames;
}

function link(params) {
  const query = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v) query.set(k, v);
  const text = query.toString();
  return text ? `#/?${text}` : "#/";
}

export async function showList(main, params, signal, failed) {
  const agent = params.get("agent") || "";
  const status = params.get("status") || "";
  const before = params.get("before") || "";
  const back = params.get("back") || ""; // the anchors of the newer pages, for "newer"
  const names = await agents();
  const query = new URLSearchParams({ limit: String(PAGE + 1) });
  if (agent) query.set("agent", agent);
  if (status) query.set("status", status);
  if (before) query.set("before", before);
  const first = await api.get(`/sessions?${query}`);
  if (signal.aborted) return;

  const agentSelect = el("select", { id: "filter-agent", "aria-label": "agent" },
    el("option", { value: "" }, "all agents"),
    [...new Set([...names, ...(agent ? [agent] : [])])].map((name) => el("option", { value: name, selected: name === agent }, name)));
  const statusSelect = el("select", { id: "filter-status", "aria-label": "status" },
    STATUSES.map((s) => el("option", { value: s, selected: s === status }, s || "any status")));
  const filter = () => { location.hash = link({ agent: agentSelect.value, status: statusSelect.value }); };
  agentSelect.addEventListener("change", filter);
  statusSelect.addEventListener("change", filter);

  const body = el("tbody", { id: "sessions" });
  const table = el("table", { class: "sessions" },
    el("thead", null, el("tr", null, ["agent", "key", "status", "last activity", "created", "session"].map((h) => el("th", null, h)))),
    body);
  const empty = el("p", { class: "muted", id: "no-sessions", hidden: true }, "No sessions here yet.");
  const older = el("a", { id: "older", class: "button", hidden: true }, "older →");
  const newer = el("a", { id: "newer", class: "button", hidden: !before }, "← newer");
  if (before) {
    const anchors = back ? back.split(",") : [];
    const previous = anchors.pop() || "";
    newer.href = link({ agent, status, before: previous, back: anchors.join(",") });
  }
  clear(main).append(
    el("section", { class: "toolbar" }, el("h1", null, "Sessions"), agentSelect, statusSelect, newSessionForm(names)),
    table, empty, el("nav", { class: "pager" }, newer, older));

  const rows = new Map(); // session id -> [tr, the JSON it shows]
  function render(found) {
    const page = found.slice(0, PAGE);
    older.hidden = found.length <= PAGE;
    if (!older.hidden) {
      const anchors = back ? back.split(",") : [];
      if (before) anchors.push(before);
      older.href = link({ agent, status, before: page[page.length - 1].id, back: anchors.join(",") });
    }
    empty.hidden = page.length > 0;
    const seen = new Set();
    let previous = null;
    for (const session of page) {
      seen.add(session.id);
      const shown = JSON.stringify(session);
      let entry = rows.get(session.id);
      if (!entry || entry[1] !== shown) {
        const tr = row(session);
        if (entry) entry[0].replaceWith(tr);
        entry = [tr, shown];
        rows.set(session.id, entry);
      }
      const tr = entry[0];
      if (tr.previousSibling !== previous || tr.parentNode !== body) {
        if (previous) previous.after(tr);
        else body.prepend(tr);
      }
      previous = tr;
    }
    for (const cell of body.querySelectorAll("td.when")) cell.textContent = when(cell.dataset.at);
    for (const [id, [tr]] of rows) {
      if (!seen.has(id)) {
        tr.remove();
        rows.delete(id);
      }
    }
  }
  render(first);
  for (;;) {
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    if (signal.aborted) return;
    if (document.hidden) continue;
    try {
      render(await api.get(`/sessions?${query}`));
    } catch (err) {
      failed(err);
      return;
    }
  }
}

function row(session) {
  const open = () => { location.hash = `#/s/${encodeURIComponent(session.id)}`; };
  const last = session.last_activity_at; // its latest event (created_at before any)
  const tr = el("tr", { class: "session", dataset: { id: session.id, status: session.status }, tabindex: "0", onclick: open,
    onkeydown: (e) => { if (e.key === "Enter") open(); } },
    el("td", { class: "agent" }, session.agent),
    el("td", { class: "key" }, session.key ?? ""),
    el("td", null, el("span", { class: `pill status-${session.status}` }, session.status)),
    el("td", { class: "activity when", title: time(last), dataset: { at: last } }, when(last)),
    el("td", { class: "when", title: time(session.created_at), dataset: { at: session.created_at } }, when(session.created_at)),
    el("td", { class: "muted" }, el("a", { href: `#/s/${encodeURIComponent(session.id)}` }, shortId(session.id)),
      session.forked_from ? " (fork)" : "", session.parent_id ? " (sub-agent)" : ""));
  return tr;
}

function newSessionForm(names) {
  const agent = el("select", { id: "new-agent", "aria-label": "agent of the new session" }, names.map((n) => el("option", { value: n }, n)));
  const key = el("input", { id: "new-key", placeholder: "key (optional)", "aria-label": "key" });
  const error = el("span", { class: "error", role: "alert" });
  const form = el("form", { class: "new-session" }, agent, key, el("button", { type: "submit" }, "New session"), error);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const body = { agent: agent.value };
      if (key.value.trim()) body.key = key.value.trim();
      const session = await api.post("/sessions", body);
      location.hash = `#/s/${encodeURIComponent(session.id)}`;
    } catch (err) {
      error.textContent = err.message;
    }
  });
  if (!names.length) form.hidden = true;
  return form;
}
