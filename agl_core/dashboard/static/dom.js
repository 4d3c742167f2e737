// DOM helpers. Every piece of store data reaches the page as a text node (textContent), never as HTML:
// no innerHTML anywhere, no href/src built from store data, so span content cannot inject markup or script.

/** Build an element. attrs: class, title, data-*, aria-*, id, type, value, placeholder, for, colspan,
 *  href (only internal "#..." links), and on* handlers given as functions. Children: nodes or text. */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") {
      el.addEventListener(key.slice(2).toLowerCase(), value);
    } else if (key === "href") {
      const text = String(value);
      el.setAttribute("href", text.startsWith("#") ? text : "#");
    } else if (key === "style" && typeof value === "object") {
      for (const [prop, v] of Object.entries(value)) el.style.setProperty(prop, String(v));
    } else if (key === "checked" || key === "selected" || key === "disabled") {
      el[key] = Boolean(value);
    } else {
      el.setAttribute(key, String(value));
    }
  }
  append(el, children);
  return el;
}

/** Append children (nodes, strings, numbers, nested arrays; null/undefined skipped) as safe nodes. */
export function append(el, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else if (child instanceof Node) el.appendChild(child);
    else el.appendChild(document.createTextNode(String(child)));
  }
  return el;
}

/** Replace every child of el. */
export function replace(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

/** A link to a route of this page (the id is URL-encoded into the hash). */
export function routeLink(text, ...parts) {
  return h("a", { href: "#/" + parts.map((p) => encodeURIComponent(String(p))).join("/") }, text);
}

/** Seconds since the epoch -> local "YYYY-MM-DD HH:MM:SS". */
export function fmtTime(seconds) {
  if (seconds === null || seconds === undefined) return "—";
  const d = new Date(seconds * 1000);
  const pad = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

/** A duration in seconds -> "812 ms", "3.2 s", "4 min 10 s". */
export function fmtDuration(seconds) {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return "—";
  if (seconds < 1) return `${Math.round(seconds * 1000)} ms`;
  if (seconds < 120) return `${seconds.toFixed(1)} s`;
  return `${Math.floor(seconds / 60)} min ${Math.round(seconds % 60)} s`;
}

/** A number with a few significant digits, or "—". */
export function fmtNumber(value, digits = 3) {
  if (value === null || value === undefined || !Number.isFinite(value)) return "—";
  return Number.isInteger(value) ? String(value) : value.toPrecision(digits);
}

/** "2.1 kB" style size of a string's length. */
export function fmtBytes(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} kB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

/** A status badge (class from a fixed list, text from the data). */
export function badge(status) {
  const known = ["succeeded", "failed", "cancelled", "running", "queuing", "preparing", "requeuing",
    "timeout", "unresponsive", "idle", "busy", "unknown", "ok", "error"];
  const cls = known.includes(status) ? `badge badge-${status}` : "badge";
  return h("span", { class: cls }, status ?? "—");
}

/** Text that may be huge: the first `limit` characters, with a button that shows the rest on demand. */
export function longText(text, limit = 4000) {
  const flat = Array.isArray(text) && text.every((x) => x === null || typeof x !== "object");
  const value = typeof text === "string" ? text : JSON.stringify(text, null, flat ? 0 : 2) ?? String(text);
  const pre = h("pre", { class: "text" });
  if (value.length <= limit) return append(pre, [value]);
  pre.textContent = value.slice(0, limit);
  const more = h("button", { class: "more", type: "button" }, `show all ${fmtBytes(value.length)}`);
  more.addEventListener("click", () => {
    pre.textContent = value;
    more.remove();
  });
  return h("div", {}, pre, more);
}
