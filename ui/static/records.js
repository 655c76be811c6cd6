// The record browser of a rollout store: a page of records from the base table, the
// write-ahead log or both, filtered by a SQL predicate, with a choice of columns; one
// record's fields with a preview and download of its blob; and the trajectory of its
// rollout: every step in order with its role, content and reward.
import { get, blob, q, h, download, fmtInt } from "./api.js";
import { setQuery, showError } from "./app.js";

const PAGE = 25;
const DEFAULT_COLUMNS = ["id", "rollout_id", "sequence_order", "role", "content", "reward", "content_type", "created_at"];
const COLS_KEY = "lancectx.recordColumns";

function cell(v) {
  if (v === undefined || v === null) return "";
  const s = typeof v === "object" ? JSON.stringify(v) : String(v);
  return s.length > 120 ? s.slice(0, 117) + "…" : s;
}

/** trajectory renders a rollout's steps in order (sequence_order, then created_at). */
export function trajectory(recs) {
  const steps = recs.slice().sort((a, b) => (a.sequence_order - b.sequence_order) || String(a.created_at).localeCompare(String(b.created_at)));
  return h("div", { id: "trajectory" }, steps.map((r, i) => h("div", { class: "step role-" + (r.role || "none"), "data-step": i },
    h("div", { class: "meta" }, `#${r.sequence_order} · ${r.role || "(no role)"}` + (r.reward !== undefined ? ` · reward ${r.reward}` : "") + ` · ${r.id}`),
    h("div", { class: "content" }, r.content ?? r.model_output_string ?? r.model_input_string ?? ""))));
}

async function blobPanel(base, id) {
  const box = h("div", { class: "preview", id: "blob-preview" });
  let got;
  try {
    got = await blob(`${base}/records/${encodeURIComponent(id)}/blob`);
  } catch (err) {
    box.append(h("p", { class: "muted" }, err.status === 404 ? "No blob." : "Blob: " + err.message));
    return box;
  }
  const m = /filename="?([^";]+)"?/.exec(got.disposition);
  const filename = m ? m[1] : id;
  box.append(h("p", {}, `Blob: ${got.type || "application/octet-stream"}, ${fmtInt(got.blob.size)} bytes `,
    h("button", { id: "blob-download", onclick: () => download(got.blob, filename) }, "Download " + filename)));
  if (got.type.startsWith("image/")) {
    box.append(h("img", { src: URL.createObjectURL(got.blob), alt: "blob of " + id, id: "blob-image" }));
  } else if (/^text\/|json|xml|yaml|csv/.test(got.type)) {
    box.append(h("pre", { id: "blob-text" }, await got.blob.slice(0, 65536).text()));
  }
  return box;
}

export async function render(view, args, query, current) {
  const [kind, name] = args;
  const base = "/api/v1/experiments/" + encodeURIComponent(name);
  const source = query.get("source") || "all", filter = query.get("filter") || "";
  const page = Math.max(0, parseInt(query.get("page") || "0", 10) || 0);
  const selected = query.get("record") || "", rollout = query.get("rollout") || "";
  const state = { source, filter, page, record: selected, rollout };
  const go = (changes) => setQuery(Object.assign({}, state, changes));
  let cols;
  try { cols = JSON.parse(localStorage.getItem(COLS_KEY)) || DEFAULT_COLUMNS; } catch (_) { cols = DEFAULT_COLUMNS; }

  const sourceIn = h("select", { id: "source", onchange: () => go({ source: sourceIn.value, page: 0 }) },
    [["all", "base + WAL"], ["fragments", "base table"], ["wal", "WAL only"]].map(([v, l]) => h("option", { value: v, selected: v === source }, l)));
  const filterIn = h("input", { id: "filter", size: 50, placeholder: "SQL predicate, e.g. role = 'assistant' AND reward > 0.5", value: filter });
  const form = h("form", { class: "toolbar", onsubmit: (e) => { e.preventDefault(); go({ filter: filterIn.value, page: 0, record: "", rollout: "" }); } },
    sourceIn, filterIn, h("button", { type: "submit", id: "apply-filter" }, "Apply"),
    h("button", { type: "button", disabled: page === 0, onclick: () => go({ page: page - 1 }) }, "‹ prev"),
    h("button", { type: "button", id: "records-next", disabled: true }, "next ›"));
  const colBox = h("div", { class: "columns toolbar", id: "columns" });
  const table = h("table", { id: "records" });
  const side = h("div", { id: "record-detail" });
  view.append(h("h1", {}, "Records of ", h("a", { href: `#/experiment/${encodeURIComponent(kind)}/${encodeURIComponent(name)}` }, name)),
    form, colBox, h("div", { class: "split" }, h("div", {}, table), side));

  const r = await get(base + "/records" + q({ kind, source, filter, limit: PAGE, offset: page * PAGE }));
  if (!current()) return;
  form.querySelector("#records-next").disabled = !r.has_more;
  form.querySelector("#records-next").addEventListener("click", () => go({ page: page + 1 }));
  const keys = [...new Set([...DEFAULT_COLUMNS, ...r.records.flatMap((x) => Object.keys(x))])];
  colBox.append(h("span", { class: "muted" }, "columns:"), ...keys.map((k) => {
    const box = h("input", { type: "checkbox", checked: cols.includes(k), "data-column": k, onchange: () => {
      cols = box.checked ? [...cols, k] : cols.filter((c) => c !== k);
      localStorage.setItem(COLS_KEY, JSON.stringify(cols));
      draw();
    } });
    return h("label", {}, box, " ", k);
  }));
  const draw = () => {
    const shown = keys.filter((k) => cols.includes(k));
    table.replaceChildren(h("thead", {}, h("tr", {}, shown.map((k) => h("th", {}, k)))),
      h("tbody", {}, r.records.length === 0 ? h("tr", {}, h("td", { class: "muted", colspan: shown.length || 1 }, "No records.")) :
        r.records.map((rec) => h("tr", { class: "clickable" + (rec.id === selected ? " selected" : ""), "data-id": rec.id,
          onclick: () => go({ record: rec.id, rollout: "" }) }, shown.map((k) => h("td", {}, cell(rec[k])))))));
  };
  draw();

  if (rollout) {
    const steps = [];
    for (let off = 0; off < 1000; off += 100) {
      const p = await get(base + "/records" + q({ kind, source: "all", rollout_id: rollout, limit: 100, offset: off }));
      steps.push(...p.records);
      if (!p.has_more) break;
    }
    if (!current()) return;
    side.append(h("h2", {}, `Trajectory of rollout ${rollout} (${steps.length} steps)`),
      h("button", { onclick: () => go({ rollout: "" }) }, "Close"), trajectory(steps));
  } else if (selected) {
    let rec;
    try { rec = (await get(`${base}/records/${encodeURIComponent(selected)}` + q({ kind }))).record; } catch (err) { showError(err.message); return; }
    if (!current()) return;
    side.append(h("h2", {}, "Record " + rec.id),
      h("div", { class: "toolbar" }, h("button", { id: "show-trajectory", onclick: () => go({ rollout: rec.rollout_id, record: "" }) }, `Trajectory of rollout ${rec.rollout_id}`)),
      h("pre", { id: "record-json" }, JSON.stringify(rec, null, 2)),
      rec.payload_size > 0 ? await blobPanel(base, rec.id) : h("p", { class: "muted", id: "blob-preview" }, "No blob."));
  }
}
