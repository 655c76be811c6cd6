// One experiment: its stats, a chart of its rows and fragments over its versions,
// its versions and fragments, its tasks, and the optimize, rescan and compact actions
// (each confirmed first).
import { get, post, q, h, svg, fmtInt, fmtMs, fmtTime, target } from "./api.js";
import { confirmAction, showError } from "./app.js";
import { health } from "./experiments.js";
import { taskTable } from "./tasks.js";

/** chart draws rows and fragments over version time as inline SVG (two scales). */
export function chart(versions) {
  const W = 640, H = 220, L = 60, R = 50, T = 12, B = 28;
  const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart", id: "chart", role: "img", "aria-label": "rows and fragments per version" });
  if (versions.length === 0) { root.append(svg("text", { x: L, y: H / 2 }, "no versions")); return root; }
  const ts = versions.map((v) => new Date(v.timestamp).getTime());
  const t0 = Math.min(...ts), t1 = Math.max(...ts);
  const maxRows = Math.max(1, ...versions.map((v) => v.rows)), maxFrags = Math.max(1, ...versions.map((v) => v.fragments));
  const x = (t) => L + (t1 === t0 ? (W - L - R) / 2 : ((t - t0) / (t1 - t0)) * (W - L - R));
  const y = (v, max) => T + (1 - v / max) * (H - T - B);
  const line = (key, max) => versions.map((v, i) => `${x(ts[i]).toFixed(1)},${y(v[key], max).toFixed(1)}`).join(" ");
  root.append(
    svg("line", { class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B }),
    svg("line", { class: "axis", x1: L, y1: T, x2: L, y2: H - B }),
    svg("line", { class: "axis", x1: W - R, y1: T, x2: W - R, y2: H - B }),
    svg("text", { x: L - 4, y: T + 10, "text-anchor": "end" }, fmtInt(maxRows)),
    svg("text", { x: L - 4, y: H - B, "text-anchor": "end" }, "0"),
    svg("text", { x: W - R + 4, y: T + 10 }, fmtInt(maxFrags)),
    svg("text", { x: W - R + 4, y: H - B }, "0"),
    svg("text", { x: L, y: H - 8 }, fmtTime(versions[0].timestamp)),
    svg("text", { x: W - R, y: H - 8, "text-anchor": "end" }, fmtTime(versions[versions.length - 1].timestamp)),
    svg("polyline", { class: "rows", points: line("rows", maxRows) }),
    svg("polyline", { class: "frags", points: line("fragments", maxFrags) }));
  versions.forEach((v, i) => {
    const c = svg("circle", { cx: x(ts[i]).toFixed(1), cy: y(v.rows, maxRows).toFixed(1), r: 3, fill: "#2b5797", "data-version": v.version });
    c.append(svg("title", {}, `v${v.version} ${v.operation || ""}: ${v.rows} rows, ${v.fragments} fragments`));
    root.append(c);
  });
  return root;
}

function card(k, v, alert) { return h("div", { class: "card" + (alert ? " alert" : "") }, h("div", { class: "v" }, v), h("div", { class: "k" }, k)); }

export async function render(view, args, _query, current) {
  const [kind, name] = args;
  const kq = q({ kind });
  const base = "/api/v1/experiments/" + encodeURIComponent(name);
  const tgt = target(kind, name);
  const notice = h("div", { class: "notice", id: "action-result", hidden: true });
  const act = (label, what, run) => h("button", { id: "action-" + label.toLowerCase(), onclick: async () => {
    if (!(await confirmAction(`${what} ${kind} store "${name}"?`))) return;
    try {
      const res = await run();
      notice.textContent = label + ": " + (res.id ? `task ${res.id} ${res.state}` + (res.chain ? ` (chain ${res.chain.join(" → ")})` : "") : `observed version ${res.version}, ${fmtInt(res.row_count)} rows`);
      notice.hidden = false;
      showError("");
      refreshTasks();
    } catch (err) { showError(err.message); }
  } }, label);
  const tasksBox = h("div", { id: "experiment-tasks" });
  const refreshTasks = async () => {
    const r = await get("/api/v1/tasks" + q({ target: tgt, limit: 20 }));
    if (current()) tasksBox.replaceChildren(taskTable(r.tasks, refreshTasks));
  };
  view.append(h("h1", {}, name, " ", h("span", { class: "muted" }, kind)),
    h("div", { class: "toolbar" },
      act("Optimize", "Merge the WAL, compact and clean up", () => post(base + "/optimize" + kq)),
      act("Rescan", "Observe now", () => post(base + "/rescan" + kq)),
      act("Compact", "Compact", () => post("/api/v1/tasks", { kind: "compact", target: tgt })),
      kind === "rollout" ? h("a", { href: `#/records/${encodeURIComponent(kind)}/${encodeURIComponent(name)}`, id: "link-records" }, "Browse records") : null,
      h("a", { href: `#/sql/${encodeURIComponent(kind)}/${encodeURIComponent(name)}`, id: "link-sql" }, "SQL console")),
    notice);
  const [d, vs, fr] = await Promise.all([get(base + kq), get(base + "/versions" + q({ kind, limit: 200 })), get(base + "/fragments" + kq)]);
  if (!current()) return;
  const [mark, why] = health(d, d.stale);
  view.append(
    h("div", { class: "cards", id: "summary" },
      card("health", h("span", {}, h("span", { class: "health " + mark, title: why }), " " + why), mark === "bad"),
      card("rows", fmtInt(d.row_count)), card("fragments", fmtInt(d.fragment_count)), card("version", fmtInt(d.version)),
      card("versions on storage", fmtInt(vs.total)), card("pending WAL generations", fmtInt(d.pending_wal_generations), d.pending_wal_generations >= 4096),
      card("last updated", fmtMs(d.last_updated)), card("last compaction", d.last_compaction ? fmtMs(d.last_compaction) : "never"),
      card("compactions", fmtInt(d.total_compactions))),
    h("h2", {}, "Size over versions ", h("span", { class: "legend-rows" }, "■ rows"), " ", h("span", { class: "legend-frags" }, "■ fragments")),
    chart(vs.versions),
    h("div", { class: "split" },
      h("div", {}, h("h2", {}, `Versions (newest ${vs.versions.length} of ${vs.total})`),
        h("table", { id: "versions" }, h("thead", {}, h("tr", {}, ["version", "committed", "operation", "rows", "fragments"].map((c) => h("th", {}, c)))),
          h("tbody", {}, vs.versions.slice().reverse().slice(0, 50).map((v) => h("tr", {},
            h("td", { class: "num" }, v.version), h("td", {}, fmtTime(v.timestamp)), h("td", {}, v.operation || ""),
            h("td", { class: "num" }, fmtInt(v.rows)), h("td", { class: "num" }, fmtInt(v.fragments))))))),
      h("div", {}, h("h2", {}, `Fragments of version ${fr.version}`),
        h("table", { id: "fragments" }, h("thead", {}, h("tr", {}, ["id", "rows", "deleted", "files", "bytes"].map((c) => h("th", {}, c)))),
          h("tbody", {}, fr.fragments.map((f) => h("tr", {},
            h("td", { class: "num" }, f.id), h("td", { class: "num" }, fmtInt(f.physical_rows)), h("td", { class: "num" }, fmtInt(f.deleted_rows)),
            h("td", { class: "num" }, f.data_files), h("td", { class: "num" }, fmtInt(f.bytes)))))))),
    h("h2", {}, "Tasks"), tasksBox);
  await refreshTasks();
}
