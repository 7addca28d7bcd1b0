// Building the page from data without ever parsing data as HTML.
//
// Every string that reaches the document goes through el()'s children
// (text nodes) or textContent; attributes are set one by one with
// setAttribute, and only the few that cannot run script. No innerHTML,
// insertAdjacentHTML or document.write anywhere in the inspector.

export function el(tag, props, ...children) {
  const node = document.createElement(tag);
  if (props) {
    for (const [name, value] of Object.entries(props)) {
      if (value === undefined || value === null || value === false) continue;
      if (name === "class") node.className = value;
      else if (name === "text") node.textContent = value;
      else if (name === "dataset") Object.assign(node.dataset, value);
      else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
      else node.setAttribute(name, value === true ? "" : String(value));
    }
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(node, child);
    else node.append(child); // a string becomes a text node
  }
}

export function clear(node) {
  node.replaceChildren();
  return node;
}

export function json(value) {
  try {
    return JSON.stringify(value, null, 2);
  } catch {
    return String(value);
  }
}

export function shortId(id) {
  if (typeof id !== "string") return "";
  const cut = id.indexOf("_");
  const rest = cut >= 0 ? id.slice(cut + 1) : id;
  return (cut >= 0 ? id.slice(0, cut + 1) : "") + rest.slice(0, 8);
}

export function when(iso) {
  if (!iso) return "";
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return String(iso);
  const seconds = Math.round((Date.now() - date.getTime()) / 1000);
  if (seconds < 5) return "just now";
  if (seconds < 60) return `${seconds} s ago`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ago`;
  if (seconds < 86400) return `${Math.floor(seconds / 3600)} h ago`;
  return date.toLocaleString();
}

export function time(iso) {
  if (!iso) return "";
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? String(iso) : date.toLocaleString();
}

// A data: URL for a base64 image block, or an https URL; null for anything else.
const IMAGE_TYPES = /^image\/(png|jpeg|gif|webp|avif|bmp|svg\+xml)$/;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

export function imageUrl(source) {
  if (!source || typeof source !== "object") return null;
  if (source.type === "base64") {
    const type = String(source.media_type || "");
    const data = String(source.data || "");
    if (!IMAGE_TYPES.test(type) || !BASE64.test(data)) return null;
    return `data:${type};base64,${data}`;
  }
  if (source.type === "url") {
    try {
      const url = new URL(String(source.url));
      return url.protocol === "https:" ? url.href : null;
    } catch {
      return null;
    }
  }
  return null;
}
