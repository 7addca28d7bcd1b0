// The inspector's views: the key prompt, the sessions list and one session.
// Hash routes: #/ (list, with ?agent=&status=&before=) and #/s/<id>.

import { api, ApiError, AuthError, keys } from "./api.js";
import { el, clear } from "./dom.js";
import { showList } from "./list.js";
import { showSession } from "./session.js";

const main = document.getElementById("main");
const forget = document.getElementById("forget-key");
let current = null; // the AbortController of the view on screen

forget.addEventListener("click", () => {
  keys.forget();
  forget.hidden = true;
  route();
});

function route() {
  if (current) current.abort();
  current = new AbortController();
  const signal = current.signal;
  forget.hidden = !keys.get();
  const hash = location.hash || "#/";
  const view = hash.startsWith("#/s/")
    ? () => showSession(main, decodeURIComponent(hash.slice(4)), signal, failed)
    : () => showList(main, new URLSearchParams(hash.split("?")[1] || ""), signal, failed);
  view().catch(failed);

  function failed(err) {
    if (signal.aborted) return;
    if (err instanceof AuthError) {
      current.abort();
      askForKey(err);
    } else {
      clear(main).append(el("p", { class: "error", role: "alert" }, errorText(err)));
      console.error(err);
    }
  }
}

export function errorText(err) {
  if (err instanceof ApiError) return `${err.status || "network"}: ${err.message}`;
  return String((err && err.message) || err);
}

// No data without the key: the page shows nothing but this form until the
// server accepts a key, which is then kept for this tab only.
function askForKey(err) {
  const hadKey = Boolean(keys.get());
  keys.forget();
  forget.hidden = true;
  const input = el("input", {
    type: "password",
    id: "api-key",
    autocomplete: "off",
    placeholder: "API key",
    "aria-label": "API key",
  });
  const message = el("p", { class: hadKey ? "error" : "muted", role: "status" },
    hadKey ? "The server refused the key kept for this tab. Enter it again." : "This server needs an API key (the one given to turnkit serve with --api-key or TURNKIT_API_KEY). It is kept for this tab only.");
  const button = el("button", { type: "submit" }, "Use key");
  const form = el("form", { id: "key-form", class: "card" }, el("h2", null, "API key"), message, input, button);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const key = input.value.trim();
    if (!key) return;
    button.disabled = true;
    try {
      await api.check(key);
      keys.set(key);
      route();
    } catch (failure) {
      message.className = "error";
      message.textContent =
        failure instanceof AuthError ? `Wrong key: the server refused it (${failure.message}).` : errorText(failure);
      input.select();
    } finally {
      button.disabled = false;
    }
  });
  clear(main).append(form);
  input.focus();
  void err;
}

window.addEventListener("hashchange", route);
route();
