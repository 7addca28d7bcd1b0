// One session's conversation as a person reads it, built from its event log.
//
// The durable events (seq order) make the timeline: each turn's input with
// its source, steering and merged parts, the messages (text, images, tool
// calls with input and result, thinking folded), questions, approvals and
// how the turn ended. Live deltas grow one bubble per turn by appending to
// text nodes (no re-render); the durable message replaces the bubble.

import { el, imageUrl, json, shortId, time } from "./dom.js";

const SOURCES = ["user", "channel", "webhook", "schedule", "subagent", "event", "system"];

export class Conversation {
  constructor(root, { onFork }) {
    this.root = root;
    this.onFork = onFork;
    this.target = root;
    this.count = 0; // durable messages so far: the `at` of a fork after the next one
    this.turns = new Map(); // turn id -> {card, status, sawInput}
    this.calls = new Map(); // tool call id -> {card, status, result}
    this.live = new Map(); // turn id -> {row, body, max, parts}
    this.approvals = new Map(); // question id -> approvals [{call_id, tool, input}]
    this.scrollQueued = false;
  }

  // The first render: everything in one fragment, added to the page once.
  load(copied, events) {
    const fragment = document.createDocumentFragment();
    this.target = fragment;
    if (copied.length) this.add(el("div", { class: "note" }, "copied from the session this one forks"));
    for (const message of copied) this.message(message, null);
    for (const event of events) this.apply(event);
    this.target = this.root;
    this.root.append(fragment);
  }

  add(node) {
    const follow = this.target === this.root && this.nearBottom();
    this.target.append(node);
    if (follow) this.scrollSoon();
  }

  nearBottom() {
    const page = document.scrollingElement;
    return page.scrollHeight - page.scrollTop - page.clientHeight < 120;
  }

  scrollSoon() {
    if (this.scrollQueued) return;
    this.scrollQueued = true;
    requestAnimationFrame(() => {
      this.scrollQueued = false;
      const page = document.scrollingElement;
      page.scrollTop = page.scrollHeight;
    });
  }

  apply(event) {
    const data = event.data || {};
    switch (event.type) {
      case "input.received":
        if (data.held) this.line(event, `${data.source} input held until the question is answered`, data.text);
        break;
      case "input.steered":
        this.line(event, "input steered into the running turn", shortId(data.input_id));
        break;
      case "turn.started":
        this.turnStarted(event);
        break;
      case "message":
        this.message(data.message || {}, event.turn_id);
        break;
      case "tool.started":
        this.toolState(data.id, "running", "running");
        break;
      case "tool.finished":
        this.toolState(data.id, data.is_error ? "error" : "finished", data.is_error ? "error" : "done");
        break;
      case "question.asked":
        this.question(event);
        break;
      case "approval.decided":
        this.decided(event);
        break;
      case "turn.completed":
      case "turn.failed":
      case "turn.cancelled":
        this.turnEnded(event);
        break;
      case "history.compacted":
        this.line(
          event,
          `history compacted: ${data.replaced} messages summarised`,
          `tokens ${data.tokens_before} → ${data.tokens_after}`,
        );
        break;
      default:
        this.line(event, event.type, json(data));
    }
  }

  line(event, title, detail) {
    this.add(
      el(
        "div",
        { class: `event event-${String(event.type).replace(/\W/g, "-")}`, title: time(event.timestamp) },
        el("span", { class: "event-title" }, title),
        detail ? el("span", { class: "event-detail" }, String(detail)) : null,
      ),
    );
  }

  turnStarted(event) {
    const input = (event.data && event.data.input) || {};
    const status = el("span", { class: "pill status-running" }, "running");
    const card = el(
      "section",
      { class: "input", dataset: { turn: event.turn_id || "" } },
      el(
        "header",
        null,
        sourceBadge(input.source),
        el("span", { class: "muted" }, `turn ${shortId(event.turn_id)} · ${time(input.received_at)}`),
        status,
      ),
      inputBody(input),
    );
    this.turns.set(event.turn_id, { card, status, sawInput: false });
    this.add(card);
  }

  turnEnded(event) {
    const data = event.data || {};
    const turn = this.turns.get(event.turn_id);
    const kind = event.type.slice("turn.".length);
    if (turn) {
      turn.status.textContent = kind;
      turn.status.className = `pill status-${kind}`;
    }
    this.dropLive(event.turn_id);
    const words = { completed: "turn completed", failed: "turn failed", cancelled: "turn cancelled" };
    let detail = "";
    if (kind === "failed") detail = [data.reason, data.error].filter(Boolean).join(": ");
    if (kind === "cancelled") detail = data.reason || "";
    this.line(event, words[kind], detail);
  }

  message(message, turnId) {
    const index = this.count;
    this.count += 1;
    const role = message.role || "unknown";
    const blocks = Array.isArray(message.content) ? message.content : [];
    const turn = turnId ? this.turns.get(turnId) : null;
    if (role === "assistant" && turnId) this.dropLive(turnId);
    const results = blocks.filter((b) => b && b.type === "tool_result");
    const row = el("article", { class: `msg role-${role}`, dataset: { index: String(index) } });
    const header = el("header", null, el("span", { class: "role" }, roleName(message, results.length)));
    if (message.origin) header.append(el("span", { class: "muted" }, `${message.origin.provider}:${message.origin.model}`));
    header.append(el("span", { class: "muted" }, `#${index}`));
    const calls = blocks.some((b) => b && b.type === "tool_use");
    if (!calls) {
      header.append(
        el(
          "button",
          {
            type: "button",
            class: "fork",
            title: `a new session with messages 0 to ${index}`,
            onclick: () => this.onFork(index + 1),
          },
          "fork here",
        ),
      );
    }
    row.append(header);
    const body = el("div", { class: "body" });
    if (message.type === "compaction") {
      const replaced = message.metadata ? message.metadata.replaced : "?";
      body.append(folded(`summary of ${replaced} earlier messages`, blocksView(blocks, this)));
    } else if (role === "user" && turn && !turn.sawInput && !results.length) {
      turn.sawInput = true;
      body.append(folded("the input as the model saw it", blocksView(blocks, this)));
    } else {
      body.append(blocksView(blocks, this));
    }
    row.append(body);
    this.add(row);
  }

  toolState(id, state, word) {
    const call = this.calls.get(id);
    if (!call) return;
    call.status.textContent = word;
    call.status.className = `pill tool-${state}`;
  }

  question(event) {
    const data = event.data || {};
    const approvals = Array.isArray(data.approvals) ? data.approvals : [];
    this.approvals.set(data.question_id, approvals);
    const card = el(
      "section",
      { class: approvals.length ? "question approval" : "question" },
      el("header", null, el("span", { class: "role" }, approvals.length ? "approval needed" : "question")),
      el("div", { class: "text" }, String(data.question ?? "")),
    );
    if (approvals.length) {
      card.append(
        el(
          "ul",
          null,
          approvals.map((a) =>
            el("li", null, el("b", null, String(a.tool)), ` (${a.call_id}) `, el("pre", null, json(a.input))),
          ),
        ),
      );
    } else if (Array.isArray(data.options) && data.options.length) {
      card.append(
        el("div", { class: "muted" }, "options: " + data.options.map((o) => o.label).join(" · ")),
      );
    }
    this.add(card);
  }

  decided(event) {
    const d = event.data || {};
    const who = [d.source, d.user_id].filter(Boolean).join(" ");
    const what = `${d.approved ? "approved" : "denied"} ${d.tool} (${d.call_id})${who ? ` by ${who}` : ""}`;
    this.line(event, what, d.reason || "");
    this.toolState(d.call_id, d.approved ? "approved" : "denied", d.approved ? "approved" : "denied");
  }

  // Live output (?live=true): one bubble per turn, text appended in place.
  delta(type, event) {
    const turnId = event.turn_id;
    let state = this.live.get(turnId);
    if (!state) {
      const body = el("div", { class: "body" });
      const row = el(
        "article",
        { class: "msg role-assistant live", dataset: { turn: turnId || "" } },
        el("header", null, el("span", { class: "role" }, "assistant"), el("span", { class: "pill status-running" }, "streaming")),
        body,
      );
      state = { row, body, max: -1, parts: new Map() };
      this.live.set(turnId, state);
      this.add(row);
    }
    const index = Number(event.index);
    if (index <= state.max) return; // sent again after a reconnect
    state.max = index;
    const data = event.data || {};
    const text = String(data.text ?? "");
    const follow = this.nearBottom();
    this.livePart(state, type, data).appendData(text);
    if (follow) this.scrollSoon();
  }

  livePart(state, type, data) {
    const key = type === "tool_input.delta" ? `tool:${data.call_id}` : type;
    let node = state.parts.get(key);
    if (node) return node;
    node = document.createTextNode("");
    if (type === "thinking.delta") {
      state.body.append(el("details", { class: "thinking" }, el("summary", null, "thinking…"), el("pre", null, node)));
    } else if (type === "tool_input.delta") {
      state.body.append(
        el("div", { class: "tool-call" }, el("header", null, el("b", null, String(data.name ?? "tool")), " input"), el("pre", null, node)),
      );
    } else {
      state.body.append(el("div", { class: "text" }, node));
    }
    state.parts.set(key, node);
    return node;
  }

  dropLive(turnId) {
    const state = this.live.get(turnId);
    if (!state) return;
    state.row.remove();
    this.live.delete(turnId);
  }
}

function roleName(message, results) {
  if (message.type === "compaction") return "summary";
  if (results) return "tool results";
  return message.role || "message";
}

function sourceBadge(source) {
  const known = SOURCES.includes(source) ? source : "other";
  return el("span", { class: `badge source-${known}` }, String(source ?? "input"));
}

function folded(summary, content) {
  return el("details", null, el("summary", null, summary), content);
}

function payloadView(payload) {
  const text = json(payload);
  const pre = el("pre", { class: "payload" }, text);
  return text.length > 400 ? folded(`payload (${text.length} characters)`, pre) : el("div", null, el("div", { class: "label" }, "payload"), pre);
}

function inputBody(input) {
  const body = el("div", { class: "body" });
  if (input.answer) {
    const a = input.answer;
    body.append(el("div", { class: "answer" }, `answers question ${shortId(a.question_id)}`, a.value !== null && a.value !== undefined ? ` → ${json(a.value)}` : ""));
  }
  if (input.text) body.append(el("div", { class: "text" }, String(input.text)));
  if (input.payload !== null && input.payload !== undefined) body.append(payloadView(input.payload));
  if (input.channel) {
    const c = input.channel;
    body.append(el("div", { class: "meta" }, `${c.provider} · conversation ${c.conversation_id ?? "?"} · user ${c.user_id ?? "?"}`));
  }
  if (input.event) {
    const e = input.event;
    const result = e.result && e.result.text ? `: ${e.result.text}` : e.error ? `: ${e.error}` : "";
    body.append(el("div", { class: "meta" }, `${e.type} of session ${shortId(e.session_id)} (agent ${e.agent_id ?? "?"})${result}`));
  }
  if (input.schedule) body.append(el("div", { class: "meta" }, `schedule ${input.schedule.id} for ${time(input.schedule.scheduled_for)}`));
  if (input.webhook) body.append(el("div", { class: "meta" }, `webhook ${input.webhook.id} · message ${input.webhook.message_id}`));
  for (const [name, label] of [
    ["steering", "steering: written while the agent worked or a question was open"],
    ["merged", "merged: inputs that joined this turn"],
  ]) {
    const held = input[name];
    if (!Array.isArray(held) || !held.length) continue;
    body.append(
      el(
        "div",
        { class: `held ${name}` },
        el("div", { class: "label" }, label),
        held.map((h) =>
          el(
            "div",
            { class: "held-item" },
            sourceBadge(h.source || (h.channel ? "channel" : "user")),
            h.text ? el("span", { class: "text" }, String(h.text)) : null,
            h.payload !== null && h.payload !== undefined ? payloadView(h.payload) : null,
          ),
        ),
      ),
    );
  }
  return body;
}

function blocksView(blocks, conversation) {
  const part = el("div", { class: "blocks" });
  for (const block of blocks) part.append(blockView(block, conversation));
  return part;
}

function blockView(block, conversation) {
  if (!block || typeof block !== "object") return el("pre", null, json(block));
  switch (block.type) {
    case "text":
      return el("div", { class: "text" }, String(block.text ?? ""));
    case "thinking":
      return folded(block.redacted ? "thinking (redacted)" : "thinking", el("pre", { class: "thinking" }, String(block.thinking ?? "")));
    case "image":
      return imageView(block.source);
    case "file":
      return el("div", { class: "file" }, `file ${block.filename ?? ""} (${(block.source && block.source.media_type) || "?"})`);
    case "tool_use":
      return toolCall(block, conversation);
    case "tool_result":
      return toolResult(block, conversation);
    default:
      return el("pre", null, json(block));
  }
}

function imageView(source) {
  const url = imageUrl(source);
  if (!url) return el("div", { class: "muted" }, `[image not shown: ${json(source).slice(0, 200)}]`);
  const img = el("img", { class: "image", alt: "image from the conversation", loading: "lazy" });
  img.src = url;
  return img;
}

function toolCall(block, conversation) {
  const status = el("span", { class: "pill tool-pending" }, "called");
  const result = el("div", { class: "result" });
  const card = el(
    "div",
    { class: "tool-call", dataset: { callId: String(block.id) } },
    el("header", null, el("b", null, String(block.name)), el("span", { class: "muted" }, String(block.id)), status),
    el("pre", { class: "tool-input" }, json(block.input)),
    result,
  );
  conversation.calls.set(block.id, { card, status, result });
  return card;
}

function toolResult(block, conversation) {
  const content = Array.isArray(block.content)
    ? blocksView(block.content, conversation)
    : el("pre", null, String(block.content ?? ""));
  const view = el("div", { class: block.is_error ? "tool-result error" : "tool-result" }, el("div", { class: "label" }, block.is_error ? "error" : "result"), content);
  const call = conversation.calls.get(block.tool_use_id);
  if (call) {
    call.result.append(view);
    if (block.is_error) {
      call.status.textContent = "error";
      call.status.className = "pill tool-error";
    } else if (call.status.textContent === "called" || call.status.textContent === "running") {
      call.status.textContent = "done";
      call.status.className = "pill tool-finished";
    }
    return el("div", { class: "muted" }, `result of ${call.card.querySelector("b").textContent} (${block.tool_use_id}) shown with the call`);
  }
  return el("div", { class: "tool-call orphan" }, el("header", null, `result of call ${block.tool_use_id}`), view);
}
