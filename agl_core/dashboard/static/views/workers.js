// Workers: status, current rollout, last heartbeat, throughput from the heartbeat stats.
import { get } from "../api.js";
import { badge, fmtDuration, fmtTime, h, replace, routeLink } from "../dom.js";

export async function mount(container) {
  const tbody = h("tbody", {});
  const info = h("p", { class: "muted" });
  replace(container, h("h1", {}, "Workers"), info,
    h("table", { id: "workers" }, h("thead", {}, h("tr", {}, ["Worker", "Status", "Current rollout", "Last heartbeat",
      "Last dequeue", "Heartbeat stats"].map((t) => h("th", {}, t)))), tbody));
  async function load() {
    const page = await get("/workers", { limit: 500, sort_by: "worker_id" });
    const now = Date.now() / 1000;
    info.textContent = `${page.total} worker(s)`;
    replace(tbody, page.items.map((w) => h("tr", { "data-worker": w.worker_id },
      h("td", {}, w.worker_id), h("td", {}, badge(w.status)),
      h("td", {}, w.current_rollout_id ? routeLink(w.current_rollout_id, "rollout", w.current_rollout_id) : "—"),
      h("td", {}, w.last_heartbeat_time ? `${fmtTime(w.last_heartbeat_time)} (${fmtDuration(now - w.last_heartbeat_time)} ago)` : "—"),
      h("td", {}, fmtTime(w.last_dequeue_time)),
      h("td", { title: JSON.stringify(w.heartbeat_stats ?? {}) }, JSON.stringify(w.heartbeat_stats ?? {}).slice(0, 120)))));
  }
  await load();
  return { refresh: load };
}
