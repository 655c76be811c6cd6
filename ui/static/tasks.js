// The tasks page: the master's queue, newest first, filtered by state, with cancel
// (queued or running) and retry (failed) actions, each confirmed first.
import { get, post, q, h, fmtMs } from "./api.js";
import { confirmAction, showError, setQuery } from "./app.js";

const PAGE = 50;

/** taskTable renders tasks with their actions; refresh reloads after an action. */
export function taskTable(tasks, refresh) {
  const action = (t, verb) => h("button", { class: verb === "cancel" ? "danger" : "", "data-action": verb, onclick: async (e) => {
    e.stopPropagation();
    if (!(await confirmAction(`${verb === "cancel" ? "Cancel" : "Retry"} ${t.kind} task ${t.id} on ${t.target}?`))) return;
    try {
      await post(`/api/v1/tasks/${encodeURIComponent(t.id)}/${verb}`);
      showError("");
      await refresh();
    } catch (err) { showError(err.message); }
  } }, verb);
  const body = tasks.map((t) => h("tr", { "data-id": t.id, "data-state": t.state },
    h("td", { class: "mono" }, t.id), h("td", {}, t.kind), h("td", {}, t.target),
    h("td", { class: "state-" + t.state }, t.state + (t.waiting ? " (waiting)" : "") + (t.cancelled ? " (cancelled)" : "")),
    h("td", { class: "num" }, `${t.attempts}/${t.max_attempts}`), h("td", {}, fmtMs(t.enqueued_at)), h("td", {}, fmtMs(t.finished_at)),
    h("td", {}, t.error || t.detail || "", t.retry_of ? h("div", { class: "muted" }, "retry of " + t.retry_of) : null),
    h("td", {}, t.state === "queued" || t.state === "running" ? action(t, "cancel") : null, t.state === "failed" ? action(t, "retry") : null)));
  if (body.length === 0) body.push(h("tr", {}, h("td", { colspan: 9, class: "muted" }, "No tasks.")));
  return h("table", { class: "tasks" },
    h("thead", {}, h("tr", {}, ["id", "kind", "target", "state", "attempts", "enqueued", "finished", "error / detail", ""].map((c) => h("th", {}, c)))),
    h("tbody", {}, body));
}

export async function render(view, _args, query, current) {
  const state = query.get("state") || "", page = Math.max(0, parseInt(query.get("page") || "0", 10) || 0);
  const stateIn = h("select", { id: "state", onchange: () => setQuery({ state: stateIn.value }) },
    [["", "every state"], ["queued,running", "queued or running"], ["queued", "queued"], ["running", "running"], ["failed", "failed"], ["done", "done"], ["skipped", "skipped"]]
      .map(([v, l]) => h("option", { value: v, selected: v === state }, l)));
  const box = h("div", { id: "tasks" });
  const info = h("span", { class: "muted" });
  const prev = h("button", { disabled: page === 0, onclick: () => setQuery({ state, page: page - 1 }) }, "‹ prev");
  const next = h("button", { disabled: true, onclick: () => setQuery({ state, page: page + 1 }) }, "next ›");
  view.append(h("h1", {}, "Tasks"), h("div", { class: "toolbar" }, stateIn, prev, next, info), box);
  const load = async () => {
    const r = await get("/api/v1/tasks" + q({ state, limit: PAGE, offset: page * PAGE }));
    if (!current()) return;
    box.replaceChildren(taskTable(r.tasks, load));
    info.textContent = `${r.total} task${r.total === 1 ? "" : "s"}`;
    next.disabled = (page + 1) * PAGE >= r.total;
  };
  await load();
}
