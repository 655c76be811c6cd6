// The SQL console of one experiment: a read-only query over the table `records`
// (POST /api/v1/experiments/{name}/query), the answer as a table, and a CSV download.
import { post, q, h, download } from "./api.js";
import { showError } from "./app.js";

const DEFAULT_SQL = "SELECT role, count(*) AS n, avg(reward) AS avg_reward\nFROM records\nGROUP BY role\nORDER BY n DESC";

/** csv renders columns and rows as RFC 4180 CSV. */
export function csv(columns, rows) {
  const field = (v) => {
    if (v === null || v === undefined) return "";
    const s = typeof v === "object" ? JSON.stringify(v) : String(v);
    return /[",\r\n]/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s;
  };
  return [columns, ...rows].map((r) => r.map(field).join(",")).join("\r\n") + "\r\n";
}

export async function render(view, args, _query, current) {
  const [kind, name] = args;
  const key = "lancectx.sql." + kind + "." + name;
  const input = h("textarea", { class: "sql", id: "sql", spellcheck: "false" });
  input.value = sessionStorage.getItem(key) || DEFAULT_SQL;
  const out = h("div", { id: "sql-result" });
  const info = h("span", { class: "muted", id: "sql-info" });
  const csvBtn = h("button", { id: "sql-csv", disabled: true }, "Download CSV");
  let last = null;
  csvBtn.addEventListener("click", () => last && download(new Blob([csv(last.columns, last.rows)], { type: "text/csv" }), `${name}-query.csv`));
  const run = async () => {
    sessionStorage.setItem(key, input.value);
    info.textContent = "running…";
    try {
      const r = await post("/api/v1/experiments/" + encodeURIComponent(name) + "/query" + q({ kind }), { sql: input.value });
      if (!current()) return;
      showError("");
      last = r;
      csvBtn.disabled = false;
      info.textContent = `${r.row_count} row${r.row_count === 1 ? "" : "s"}` + (r.truncated ? " (truncated at 10,000)" : "");
      out.replaceChildren(h("table", { id: "sql-table" },
        h("thead", {}, h("tr", {}, r.columns.map((c) => h("th", {}, c)))),
        h("tbody", {}, r.rows.map((row) => h("tr", {}, row.map((v) => h("td", {}, v === null ? "NULL" : typeof v === "object" ? JSON.stringify(v) : String(v))))))));
    } catch (err) {
      info.textContent = "";
      showError(err.message);
    }
  };
  input.addEventListener("keydown", (e) => { if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); run(); } });
  view.append(h("h1", {}, "SQL over ", h("a", { href: `#/experiment/${encodeURIComponent(kind)}/${encodeURIComponent(name)}` }, name)),
    h("p", { class: "muted" }, "One read-only SELECT over the table records (base table and pending WAL; blobs left out). Ctrl+Enter runs it."),
    input, h("div", { class: "toolbar" }, h("button", { class: "primary", id: "sql-run", onclick: run }, "Run"), csvBtn, info), out);
}
