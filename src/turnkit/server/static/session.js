// One session: its header and controls, its conversation, followed live.

import { api, follow, sessionPath, AuthError } from "./api.js";
import { Conversation } from "./conversation.js";
import { el, clear, json, shortId, time } from "./dom.js";

const EVENT_PAGE = 5000;

async function allEvents(id) {
  const events = [];
  let after = 0;
  for (;;) {
    const page = await api.get(sessionPath(id, `/events?after=${after}&limit=${EVENT_PAGE}`));
    events.push(...page);
    if (page.length < EVENT_PAGE) return events;
    after = page[page.length - 1].seq;
  }
}

export async function showSession(main, id, signal, failed) {
  const started = performance.now();
  let session = await api.get(sessionPath(id));
  const events = await allEvents(id);
  const copied = session.forked_from
    ? (await api.get(sessionPath(id, "/messages"))).slice(0, session.forked_from.at)
    : [];
  if (signal.aborted) return;
  const fetched = performance.now();

  const header = el("section", { class: "session-header" });
  const log = el("div", { id: "conversation", class: "conversation" });
  const actions = el("section", { id: "actions", class: "actions" });
  const connection = document.getElementById("connection");
  clear(main).append(header, log, actions);

  const conversation = new Conversation(log, {
    onFork: (at) => fork(at),
  });
  conversation.load(copied, events);
  const last = events.length ? events[events.length - 1].seq : 0;
  performance.mark("turnkit:conversation-shown");
  document.body.dataset.shownMs = String(Math.round(performance.now() - started));
  document.body.dataset.fetchMs = String(Math.round(fetched - started));
  document.body.dataset.messages = String(conversation.count);
  document.scrollingElement.scrollTop = document.scrollingElement.scrollHeight;

  const notice = el("p", { class: "error", role: "alert", id: "action-error" });
  async function act(work) {
    notice.textContent = "";
    try {
      await work();
      refreshSoon();
    } catch (err) {
      if (err instanceof AuthError) failed(err);
      else notice.textContent = err.message;
    }
  }
  async function fork(at) {
    await act(async () => {
      const made = await api.post(sessionPath(id, "/fork"), { at });
      location.hash = `#/s/${encodeURIComponent(made.id)}`;
    });
  }

  const composer = composerForm(id, act);
  // The open question's form outlives redraws (a refresh, a reconnect), so
  // decisions made and reasons typed so far are kept until it is answered.
  const asking = { id: null, form: null };
  function draw() {
    drawHeader(header, session, act, id);
    drawActions(actions, session, conversation, act, id, notice, composer, asking);
  }
  draw();

  let refreshing = null;
  function refreshSoon() {
    if (refreshing) return;
    refreshing = setTimeout(async () => {
      refreshing = null;
      try {
        session = await api.get(sessionPath(id));
        if (!signal.aborted) draw();
      } catch (err) {
        if (!signal.aborted) failed(err);
      }
    }, 50);
  }
  const changes = new Set(["input.received", "turn.started", "question.asked", "approval.decided",
    "turn.completed", "turn.failed", "turn.cancelled"]);
  try {
    await follow(id, {
      after: last,
      signal,
      onEvent: (event) => {
        conversation.apply(event);
        if (changes.has(event.type)) refreshSoon();
      },
      onLive: (type, event) => conversation.delta(type, event),
      onState: (state) => {
        connection.textContent = { live: "● live", reconnecting: "○ reconnecting…", ended: "session ended" }[state] || state;
        connection.dataset.state = state;
      },
      isEnded: async () => {
        session = await api.get(sessionPath(id));
        draw();
        return session.status === "ended";
      },
    });
  } finally {
    if (refreshing) clearTimeout(refreshing);
    if (signal.aborted) connection.textContent = "";
  }
}

function drawHeader(header, session, act, id) {
  const cancel = el("button", { type: "button", id: "cancel", disabled: session.status !== "running" }, "Cancel turn");
  cancel.addEventListener("click", () => act(() => api.post(sessionPath(id, "/cancel"))));
  const end = el("button", { type: "button", id: "end", class: "danger", disabled: session.status === "ended" }, "End session");
  end.addEventListener("click", () => {
    if (confirm("End this session? It will take no more input.")) act(() => api.post(sessionPath(id, "/end")));
  });
  const forkAll = el("button", { type: "button", id: "fork-all", title: "a new session with the whole conversation" }, "Fork");
  forkAll.addEventListener("click", () => act(async () => {
    const made = await api.post(sessionPath(id, "/fork"), {});
    location.hash = `#/s/${encodeURIComponent(made.id)}`;
  }));
  const links = [];
  if (session.forked_from) {
    links.push(" · fork of ", el("a", { href: `#/s/${encodeURIComponent(session.forked_from.session_id)}` }, shortId(session.forked_from.session_id)), ` at ${session.forked_from.at}`);
  }
  if (session.parent_id) links.push(" · sub-agent of ", el("a", { href: `#/s/${encodeURIComponent(session.parent_id)}` }, shortId(session.parent_id)));
  clear(header).append(
    el("div", { class: "title" },
      el("a", { href: "#/" }, "← sessions"),
      el("h1", null, session.agent, session.key ? el("span", { class: "key" }, ` · ${session.key}`) : null),
      el("span", { id: "session-status", class: `pill status-${session.status}` }, session.status)),
    el("div", { class: "muted" }, `${session.id} · created ${time(session.created_at)}`,
      session.last_activity_at ? ` · last active ${time(session.last_activity_at)}` : "", ...links,
      session.ended_at ? ` · ended ${time(session.ended_at)}` : ""),
    el("div", { class: "controls" }, cancel, end, forkAll),
  );
  if (Object.keys(session.data || {}).length) {
    header.append(el("details", null, el("summary", null, "session data"), el("pre", null, json(session.data))));
  }
}

function drawActions(actions, session, conversation, act, id, notice, composer, asking) {
  clear(actions);
  const question = session.question;
  if (question && session.status === "awaiting_input") {
    if (asking.id !== question.id || !asking.form) {
      const approvals = question.approvals || conversation.approvals.get(question.id) || [];
      asking.id = question.id;
      asking.form = approvals.length ? approvalForm(question, approvals, act, id) : questionButtons(question, act, id);
    }
    actions.append(asking.form);
  } else {
    asking.id = asking.form = null;
  }
  if (session.status === "ended") actions.append(el("p", { class: "muted" }, "This session has ended: it takes no more input."));
  else actions.append(composer);
  actions.append(notice);
}

function questionButtons(question, act, id) {
  const options = Array.isArray(question.options) ? question.options : [];
  return el("div", { class: "open-question", id: "open-question" },
    el("div", { class: "label" }, "The agent asks"),
    el("div", { class: "text" }, question.text),
    el("div", { class: "options" }, options.map((option) =>
      el("button", { type: "button", class: "option", onclick: () => act(() =>
        api.post(sessionPath(id, "/turns"), { input: { text: String(option.label) }, answers: question.id })) },
      String(option.label)))),
    el("div", { class: "muted" }, "or type an answer below"));
}

// Each pending call: approve or deny, with an optional reason; sent once all are decided.
function approvalForm(question, approvals, act, id) {
  const decisions = new Map();
  const sendAll = () => {
    const body = {};
    for (const [callId, d] of decisions) body[callId] = d.reason ? { approved: d.approved, reason: d.reason } : { approved: d.approved };
    return act(() => api.post(sessionPath(id, "/approvals"), { decisions: body }));
  };
  const rows = approvals.map((a) => {
    const reason = el("input", { class: "reason", placeholder: "reason (optional)", "aria-label": `reason for ${a.tool}` });
    const state = el("span", { class: "muted decision" });
    const decide = (approved) => {
      decisions.set(a.call_id, { approved, reason: reason.value.trim() });
      state.textContent = approved ? "approve" : "deny";
      if (decisions.size === approvals.length) sendAll();
    };
    return el("li", { class: "approval-item", dataset: { callId: String(a.call_id) } },
      el("div", null, el("b", null, String(a.tool)), el("span", { class: "muted" }, ` ${a.call_id}`)),
      el("pre", { class: "tool-input" }, json(a.input)),
      el("div", { class: "decide" },
        el("button", { type: "button", class: "approve", onclick: () => decide(true) }, "Approve"),
        el("button", { type: "button", class: "deny danger", onclick: () => decide(false) }, "Deny"),
        reason, state));
  });
  return el("div", { class: "open-question approvals", id: "open-approvals" },
    el("div", { class: "label" }, `Approval needed: ${question.text}`),
    el("ul", null, rows));
}

function composerForm(id, act) {
  const text = el("textarea", { id: "input-text", rows: "3", placeholder: "Send input as the user (Enter sends, Shift+Enter for a new line)", "aria-label": "input" });
  const payload = el("textarea", { id: "input-payload", rows: "3", placeholder: "JSON payload (optional)", "aria-label": "payload" });
  const button = el("button", { type: "submit", id: "send" }, "Send");
  const form = el("form", { id: "composer", class: "composer" }, text,
    el("details", null, el("summary", null, "payload"), payload), button);
  const submit = async () => {
    const input = {};
    if (text.value.trim()) input.text = text.value;
    if (payload.value.trim()) {
      try {
        input.payload = JSON.parse(payload.value);
      } catch (err) {
        await act(() => Promise.reject(new Error(`the payload is not JSON: ${err.message}`)));
        return;
      }
    }
    if (!Object.keys(input).length) return;
    button.disabled = true;
    const sent = { text: text.value, payload: payload.value };
    await act(async () => {
      await api.post(sessionPath(id, "/turns"), { input });
      // What was typed while the send was in flight is the next input: keep it.
      if (text.value === sent.text) text.value = "";
      if (payload.value === sent.payload) payload.value = "";
    });
    button.disabled = false;
    text.focus();
  };
  form.addEventListener("submit", (event) => { event.preventDefault(); submit(); });
  text.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey) { event.preventDefault(); submit(); }
  });
  return form;
}
