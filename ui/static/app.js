// The single-page app: a hash router (#/experiments, #/experiment/{kind}/{name},
// #/records/{kind}/{name}, #/sql/{kind}/{name}, #/tasks, #/cluster), the error
// banner, the token form and the confirmation dialog the actions use.
import { token, setToken } from "./api.js";
import * as experiments from "./experiments.js";
import * as experiment from "./experiment.js";
import * as records from "./records.js";
import * as sql from "./sql.js";
import * as tasks from "./tasks.js";
import * as cluster from "./cluster.js";

const pages = { experiments, experiment, records, sql, tasks, cluster };
const main = document.getElementById("main");
const banner = document.getElementById("error");
let generation = 0;

/** showError puts a message in the banner (or clears it with ""). */
export function showError(msg) {
  banner.textContent = msg || "";
  banner.hidden = !msg;
}

/** confirmAction asks in a modal dialog and resolves true on Confirm, false on Cancel
 * or Escape. It listens to the buttons, not to the dialog's close event: a close still
 * queued from the previous question must not answer this one. */
export function confirmAction(text) {
  const dlg = document.getElementById("confirm");
  if (dlg.open) return Promise.resolve(false); // one question at a time
  document.getElementById("confirm-text").textContent = text;
  const yes = document.getElementById("confirm-yes"), no = document.getElementById("confirm-no");
  return new Promise((resolve) => {
    const done = (answer) => {
      yes.removeEventListener("click", onYes);
      no.removeEventListener("click", onNo);
      dlg.removeEventListener("cancel", onNo);
      resolve(answer);
    };
    const onYes = () => done(true), onNo = () => done(false);
    yes.addEventListener("click", onYes);
    no.addEventListener("click", onNo);
    dlg.addEventListener("cancel", onNo);
    dlg.showModal();
  });
}

/** parseHash splits the location's hash into a route, its path segments and query. */
function parseHash() {
  const raw = location.hash.replace(/^#\/?/, "");
  const [path, query] = raw.split("?", 2);
  const segs = path.split("/").filter(Boolean).map(decodeURIComponent);
  return { name: segs[0] || "experiments", args: segs.slice(1), query: new URLSearchParams(query || "") };
}

/** navigate changes the query of the current route (replacing history) and renders. */
export function setQuery(params) {
  const { name, args } = parseHash();
  const u = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== "") u.set(k, String(v));
  const s = u.toString();
  const h = "#/" + [name, ...args.map(encodeURIComponent)].join("/") + (s ? "?" + s : "");
  if (location.hash !== h) location.hash = h; else render();
}

async function render() {
  const gen = ++generation;
  const route = parseHash();
  const page = pages[route.name];
  document.body.dataset.ready = "";
  showError("");
  for (const a of document.querySelectorAll("nav a")) {
    const nav = a.dataset.nav;
    a.classList.toggle("active", nav === route.name || (nav === "experiments" && ["experiment", "records", "sql"].includes(route.name)));
  }
  if (!page) {
    main.replaceChildren(document.createTextNode("No such page: " + route.name));
    document.body.dataset.ready = "none";
    return;
  }
  const view = document.createElement("div");
  main.replaceChildren(view);
  try {
    await page.render(view, route.args, route.query, () => gen === generation);
  } catch (err) {
    if (gen === generation) showError(err.message || String(err));
  }
  if (gen === generation) document.body.dataset.ready = route.name;
}

const input = document.getElementById("token");
input.value = token();
document.getElementById("token-form").addEventListener("submit", (e) => {
  e.preventDefault();
  setToken(input.value.trim());
  render();
});
window.addEventListener("hashchange", render);
render();
