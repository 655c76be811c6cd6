// The cluster page: the planner leader, the masters and workers, every loop's
// freshness (the health checks), the shared _stats maintenance bookkeeping and the
// _stats metrics of this master (the alerting signal is the unreclaimed versions).
import { get, text, h, fmtTime, fmtInt } from "./api.js";

const STATS_METRICS = ["master_stats_version", "master_stats_unreclaimed_versions", "master_stats_maintenance_consecutive_failures",
  "master_stats_maintenance_failures_total", "master_stats_versions_removed_total", "master_stats_snapshot_age_seconds"];

/** metricValues picks unlabelled samples of names out of the Prometheus text format. */
export function metricValues(body, names) {
  const out = new Map();
  for (const line of body.split("\n")) {
    if (line.startsWith("#")) continue;
    const [name, value] = line.trim().split(/\s+/);
    if (names.includes(name)) out.set(name, Number(value));
  }
  return out;
}

function card(k, v, alert) { return h("div", { class: "card" + (alert ? " alert" : "") }, h("div", { class: "v" }, v), h("div", { class: "k" }, k)); }

export async function render(view, _args, _query, current) {
  const [c, health, metrics] = await Promise.all([get("/api/v1/cluster"), get("/api/v1/health", [503]),
    text("/metrics").catch(() => "")]);
  if (!current()) return;
  const m = c.stats_maintenance;
  const mv = metricValues(metrics, STATS_METRICS);
  const failing = m.consecutive_failures > 0;
  view.append(h("h1", {}, "Cluster"),
    h("div", { class: "cards", id: "cluster-summary" },
      card("planner leader", c.leader ? c.leader.id : "none", !c.leader), card("this master", c.self),
      card("masters", c.masters.length), card("workers", c.workers.length),
      card("health", h("span", { class: "status-" + health.status }, health.status), health.status !== "ok"),
      card("_stats version", fmtInt(c.stats.version)), card("experiments", fmtInt(c.stats.experiments)),
      card("newest scan", fmtTime(c.stats.newest_scan)), card("snapshot", c.stats.stale ? "stale" : "fresh", c.stats.stale)),
    h("h2", {}, "_stats maintenance"),
    h("div", { class: "cards", id: "maintenance" },
      card("unreclaimed versions (alert signal)", fmtInt(m.unreclaimed), failing && m.unreclaimed > 0),
      card("consecutive failures", fmtInt(m.consecutive_failures), failing),
      card("failures (all masters)", fmtInt(m.failures_total)),
      card("last success", fmtTime(m.last_success_at) + (m.last_success_version ? ` (v${m.last_success_version})` : "")),
      card("measured at version", fmtInt(m.measured_at_version))),
    m.last_error ? h("pre", { id: "maintenance-error", class: "state-failed" }, "last error: " + m.last_error) : "",
    h("h2", {}, "_stats metrics of this master"),
    h("table", { id: "stats-metrics" }, h("tbody", {}, STATS_METRICS.map((n) => h("tr", {}, h("td", {}, n), h("td", { class: "num" }, mv.has(n) ? fmtInt(mv.get(n)) : "–"))))),
    h("h2", {}, "Loops"),
    h("table", { id: "loops" }, h("thead", {}, h("tr", {}, ["check", "status", "last success", "consecutive failures", "message"].map((x) => h("th", {}, x)))),
      h("tbody", {}, health.checks.map((k) => h("tr", {}, h("td", {}, k.name), h("td", { class: "status-" + k.status }, k.status),
        h("td", {}, fmtTime(k.last_success)), h("td", { class: "num" }, k.consecutive_failures || 0), h("td", {}, k.message || ""))))),
    h("h2", {}, "Masters"),
    h("table", { id: "masters" }, h("thead", {}, h("tr", {}, ["id", "address", "started", "leader"].map((x) => h("th", {}, x)))),
      h("tbody", {}, c.masters.map((x) => h("tr", {}, h("td", {}, x.id), h("td", {}, x.address || ""), h("td", {}, fmtTime(x.started_at)), h("td", {}, x.leader ? "leader" : ""))))),
    h("h2", {}, "Workers"),
    h("table", { id: "workers" }, h("thead", {}, h("tr", {}, ["id", "endpoint", "shards", "started"].map((x) => h("th", {}, x)))),
      h("tbody", {}, c.workers.map((w) => h("tr", {}, h("td", {}, w.id), h("td", {}, w.endpoint), h("td", {}, (w.shards || []).join(", ")), h("td", {}, fmtTime(w.started_at)))))));
}
