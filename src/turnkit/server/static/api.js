// The server's HTTP API as the page uses it: JSON requests with the tab's
// key, and the events stream read with fetch (EventSource cannot send an
// Authorization header), resumed from Last-Event-ID after a drop.

const KEY_NAME = "turnkit.apiKey";

export class AuthError extends Error {}

export class ApiError extends Error {
  constructor(status, detail) {
    super(detail);
    this.status = status;
  }
}

export const keys = {
  get() {
    return sessionStorage.getItem(KEY_NAME);
  },
  set(key) {
    sessionStorage.setItem(KEY_NAME, key);
  },
  forget() {
    sessionStorage.removeItem(KEY_NAME);
  },
};

function headers(extra) {
  const all = { ...extra };
  const key = keys.get();
  if (key) all.Authorization = `Bearer ${key}`;
  return all;
}

async function problem(response) {
  try {
    const body = await response.json();
    if (body && typeof body.detail === "string") return body.detail;
    if (body && Array.isArray(body.detail)) return body.detail.map((e) => e.msg).join("; ");
    return JSON.stringify(body);
  } catch {
    return `${response.status} ${response.statusText}`;
  }
}

async function send(method, path, body, key) {
  const init = { method, headers: headers({ Accept: "application/json" }), cache: "no-store" };
  if (key !== undefined) init.headers.Authorization = `Bearer ${key}`;
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers["Content-Type"] = "application/json";
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (err) {
    if (err instanceof TypeError && /header/i.test(String(err.message))) {
      throw new AuthError("the key holds characters an HTTP header cannot carry");
    }
    throw new ApiError(0, `the server did not answer (${err.message})`);
  }
  if (response.status === 401) throw new AuthError(await problem(response));
  if (!response.ok) throw new ApiError(response.status, await problem(response));
  return response.json();
}

export const api = {
  get: (path) => send("GET", path),
  post: (path, body) => send("POST", path, body === undefined ? {} : body),
  // Checks a key the person typed, before it is kept.
  check: (key) => send("GET", "/sessions?limit=1", undefined, key),
};

export function sessionPath(id, rest = "") {
  return `/sessions/${encodeURIComponent(id)}${rest}`;
}

// Server-Sent Events from a fetch body: yields {event, data, id}; id is null
// for events sent without an id: line (the live deltas).
export async function* readEvents(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let event = "";
  let data = [];
  let id = null;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value;
      let keep = "";
      if (buffer.endsWith("\r")) {
        keep = "\r"; // may be the first half of \r\n
        buffer = buffer.slice(0, -1);
      }
      const lines = buffer.split(/\r\n|\r|\n/);
      buffer = lines.pop() + keep;
      for (const line of lines) {
        if (line === "") {
          if (data.length) yield { event: event || "message", data: data.join("\n"), id };
          event = "";
          data = [];
          id = null;
        } else if (!line.startsWith(":")) {
          const colon = line.indexOf(":");
          const field = colon < 0 ? line : line.slice(0, colon);
          let text = colon < 0 ? "" : line.slice(colon + 1);
          if (text.startsWith(" ")) text = text.slice(1);
          if (field === "event") event = text;
          else if (field === "data") data.push(text);
          else if (field === "id") id = text;
        }
      }
    }
  } finally {
    reader.releaseLock();
  }
}

function pause(ms, signal) {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

// Follow a session's events after seq `after`, live deltas included, until
// `signal` aborts or the session has ended. Each durable event is handed to
// onEvent once (a reconnect sends Last-Event-ID, and anything at or below
// the last seq seen is dropped); live deltas go to onLive; onState hears
// "live", "reconnecting" and "ended". isEnded() is asked when a stream closes.
export async function follow(sessionId, { after, onEvent, onLive, onState, isEnded, signal }) {
  let last = after;
  let delay = 250;
  while (!signal.aborted) {
    try {
      const response = await fetch(sessionPath(sessionId, "/events?live=true"), {
        headers: headers({ Accept: "text/event-stream", "Last-Event-ID": String(last) }),
        cache: "no-store",
        signal,
      });
      if (response.status === 401) throw new AuthError(await problem(response));
      if (!response.ok) throw new ApiError(response.status, await problem(response));
      onState("live");
      delay = 250;
      for await (const message of readEvents(response.body)) {
        if (message.id !== null) {
          const seq = Number(message.id);
          if (!(seq > last)) continue;
          last = seq;
          onEvent(JSON.parse(message.data));
        } else {
          onLive(message.event, JSON.parse(message.data));
        }
      }
      if (await isEnded()) {
        onState("ended");
        return;
      }
    } catch (err) {
      if (signal.aborted) return;
      if (err instanceof AuthError) throw err;
      if (err instanceof ApiError && err.status === 404) throw err;
    }
    onState("reconnecting");
    await pause(delay, signal);
    delay = Math.min(delay * 2, 5000);
  }
}
