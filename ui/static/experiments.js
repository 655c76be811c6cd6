// The experiments page: every kind's stores from the master's stats snapshot, with
// search, kind filter, sorting by any column, and paging; a health mark per row.
import { get, q, h, fmtInt, fmtMs, ago } from "./api.js";
import { setQuery } from "./app.js";

const PAGE = 50;
// The reference's read thresholds: reads warn at 256 pending WAL generations and are
// refused at 4096.
const PENDING_WARN = 256, PENDING_MAX = 4096;

const columns = [
  ["", null], ["name", "name"], ["kind", null], ["rows", "row_count"], ["fragments", "fragment_count"],
  ["pending generations", "pending_wal_generations"], ["last updated", "last_updated"],
  ["last merge", null], ["last compaction", "last_compaction"], ["compactions", "total_compactions"],
  ["last cleanup", null], ["scanned", "scanned_at"],
];

/** health rates a row: bad past the read cap, warn past the warning or when not scanned lately. */
export function health(e, stale) {
  if (e.pending_wal_generations >= PENDING_MAX) return ["bad", `${e.pending_wal_generations} pending WAL generations: reads are refused past ${PENDING_MAX}`];
  if (e.pending_wal_generations >= PENDING_WARN) return ["warn", `${e.pending_wal_generations} pending WAL generations: reads slow down past ${PENDING_WARN}`];
  if (stale) return ["warn", "the stats snapshot is stale"];
  return ["ok", "healthy"];
}

export async function render(view, _args, query, current) {
  const search = query.get("search") || "", kind = query.get("kind") || "", sort = query.get("sort") || "name";
  const page = Math.max(0, parseInt(query.get("page") || "0", 10) || 0);
  const params = () => ({ search: searchIn.value, kind: kindIn.value, sort, page: 0 });
  const searchIn = h("input", { type: "search", id: "search", placeholder: "search names", value: search });
  let timer;
  searchIn.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(() => setQuery(params()), 250); });
  const kindIn = h("select", { id: "kind", onchange: () => setQuery(params()) },
    ["", "rollout", "generic", "datagen"].map((k) => h("option", { value: k, selected: k === kind }, k || "every kind")));
  const tbody = h("tbody");
  const info = h("span", { class: "muted", id: "list-info" }, "loading…");
  const prev = h("button", { id: "prev", disabled: page === 0, onclick: () => setQuery({ search, kind, sort, page: page - 1 }) }, "‹ prev");
  const next = h("button", { id: "next", disabled: true, onclick: () => setQuery({ search, kind, sort, page: page + 1 }) }, "next ›");
  const head = h("tr", {}, columns.map(([label, key]) => {
    if (!key) return h("th", {}, label);
    const cls = "sortable" + (sort === key ? " sorted-asc" : sort === "-" + key ? " sorted-desc" : "");
    const nextSort = sort === key ? "-" + key : key;
    return h("th", { class: cls, "data-sort": key, onclick: () => setQuery({ search, kind, sort: nextSort, page: 0 }) }, label);
  }));
  view.append(h("h1", {}, "Experiments"),
    h("div", { class: "toolbar" }, searchIn, kindIn, prev, next, info),
    h("table", { id: "experiments" }, h("thead", {}, head), tbody));

  const list = await get("/api/v1/experiments" + q({ search, kind, sort, limit: PAGE, offset: page * PAGE }));
  if (!current()) return;
  const rows = list.experiments.map((e) => {
    const [mark, why] = health(e, list.stale);
    const link = "#/experiment/" + encodeURIComponent(e.kind) + "/" + encodeURIComponent(e.name);
    return h("tr", { class: "clickable", "data-name": e.name, "data-kind": e.kind, onclick: () => { location.hash = link; } },
      h("td", {}, h("span", { class: "health " + mark, title: why, "data-health": mark })),
      h("td", {}, h("a", { href: link }, e.name)), h("td", {}, e.kind),
      h("td", { class: "num" }, fmtInt(e.row_count)), h("td", { class: "num" }, fmtInt(e.fragment_count)),
      h("td", { class: "num" }, fmtInt(e.pending_wal_generations)), h("td", {}, fmtMs(e.last_updated)),
      h("td", { class: "last-merge" }, "…"), h("td", {}, e.last_compaction ? fmtMs(e.last_compaction) : "never"),
      h("td", { class: "num" }, fmtInt(e.total_compactions)), h("td", { class: "last-cleanup" }, "…"),
      h("td", { title: fmtMs(e.scanned_at) }, ago(e.scanned_at)));
  });
  tbody.replaceChildren(...rows);
  const from = list.total === 0 ? 0 : page * PAGE + 1;
  info.textContent = `${fmtInt(from)}–${fmtInt(page * PAGE + list.experiments.length)} of ${fmtInt(list.total)}` +
    (list.stale ? " (stale snapshot)" : "") + ` · _stats version ${list.stats_version}`;
  next.disabled = (page + 1) * PAGE >= list.total;
  performance.mark("lancectx:experiments-rendered");
  if (list.experiments.length === 0) tbody.append(h("tr", {}, h("td", { colspan: columns.length, class: "muted" }, "No experiments.")));

  // Last merge and cleanup come from the task history (done tasks, newest first),
  // after the first paint: the stats row does not keep them.
  const [merges, cleanups] = await Promise.all(["merge_wal", "cleanup"].map((k) =>
    get("/api/v1/tasks" + q({ kind: k, state: "done", limit: 200 })).then((r) => r.tasks, () => [])));
  if (!current()) return;
  const latest = (ts) => { const m = new Map(); for (const t of ts) if (!m.has(t.target)) m.set(t.target, t.finished_at); return m; };
  const lm = latest(merges), lc = latest(cleanups);
  for (const tr of tbody.querySelectorAll("tr[data-name]")) {
    const t = tr.dataset.kind === "rollout" ? tr.dataset.name : tr.dataset.kind + "/" + tr.dataset.name;
    tr.querySelector(".last-merge").textContent = lm.has(t) ? fmtMs(lm.get(t)) : "–";
    tr.querySelector(".last-cleanup").textContent = lc.has(t) ? fmtMs(lc.get(t)) : "–";
  }
}
