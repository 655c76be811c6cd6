// The API client of the pages and small DOM helpers. Every request carries the token
// saved in localStorage (if any) as Authorization: Bearer.

const TOKEN_KEY = "lancectx.token";

export function token() { return localStorage.getItem(TOKEN_KEY) || ""; }
export function setToken(t) {
  if (t) localStorage.setItem(TOKEN_KEY, t); else localStorage.removeItem(TOKEN_KEY);
}

function headers(extra) {
  const hd = Object.assign({}, extra);
  const t = token();
  if (t) hd["Authorization"] = "Bearer " + t;
  return hd;
}

/** ApiError is a non-2xx answer: its status and the envelope's message. */
export class ApiError extends Error {
  constructor(status, code, message) { super(message); this.status = status; this.code = code; }
}

async function failure(resp) {
  let code = "", msg = resp.status + " " + resp.statusText;
  try {
    const body = await resp.json();
    if (body && body.error) { code = body.error.code; msg = body.error.message + " (" + resp.status + ")"; }
  } catch (_) { /* not JSON */ }
  if (resp.status === 401) msg += " — enter an API token above";
  return new ApiError(resp.status, code, msg);
}

/** get fetches a JSON route; accept lists non-2xx statuses whose JSON body is wanted too. */
export async function get(path, accept = []) {
  const resp = await fetch(path, { headers: headers({ Accept: "application/json" }) });
  if (!resp.ok && !accept.includes(resp.status)) throw await failure(resp);
  return resp.json();
}

/** post sends a JSON body (or none) and returns the JSON answer. */
export async function post(path, body) {
  const init = { method: "POST", headers: headers({ Accept: "application/json" }) };
  if (body !== undefined) { init.body = JSON.stringify(body); init.headers["Content-Type"] = "application/json"; }
  const resp = await fetch(path, init);
  if (!resp.ok) throw await failure(resp);
  return resp.json();
}

/** text fetches a route's body as text (e.g. /metrics). */
export async function text(path) {
  const resp = await fetch(path, { headers: headers({}) });
  if (!resp.ok) throw await failure(resp);
  return resp.text();
}

/** blob fetches a route's body as a Blob with the answer's headers. */
export async function blob(path) {
  const resp = await fetch(path, { headers: headers({}) });
  if (!resp.ok) throw await failure(resp);
  return { blob: await resp.blob(), type: resp.headers.get("Content-Type") || "", disposition: resp.headers.get("Content-Disposition") || "" };
}

/** q builds a query string from an object, leaving out empty values. */
export function q(params) {
  const u = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== "") u.set(k, String(v));
  const s = u.toString();
  return s ? "?" + s : "";
}

/** h makes an element: attrs (on* are listeners, class, other attributes), children (strings become text). */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

/** svg makes an SVG element. */
export function svg(tag, attrs, ...children) {
  const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  for (const c of children) if (c !== undefined && c !== null) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

export function fmtInt(n) { return n === undefined || n === null ? "–" : Number(n).toLocaleString("en-US"); }

/** fmtMs formats unix milliseconds (0 or absent: –). */
export function fmtMs(ms) {
  if (!ms || ms <= 0) return "–";
  return new Date(ms).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}

/** fmtTime formats an RFC 3339 time (absent or the zero time: –). */
export function fmtTime(t) {
  if (!t || t.startsWith("0001-")) return "–";
  const d = new Date(t);
  return isNaN(d) ? t : d.toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}

/** ago says how long ago an instant (ms) was. */
export function ago(ms) {
  if (!ms || ms <= 0) return "never";
  const s = Math.max(0, (Date.now() - ms) / 1000);
  if (s < 90) return Math.round(s) + " s ago";
  if (s < 5400) return Math.round(s / 60) + " min ago";
  if (s < 129600) return Math.round(s / 3600) + " h ago";
  return Math.round(s / 86400) + " d ago";
}

/** target is the task target of a store (the rollout kind's is its bare name). */
export function target(kind, name) { return kind === "rollout" ? name : kind + "/" + name; }

/** download saves a Blob under filename. */
export function download(b, filename) {
  const url = URL.createObjectURL(b);
  const a = h("a", { href: url, download: filename });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}
