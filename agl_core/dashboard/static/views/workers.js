// Workers: status, current rollout, last heartbeat, heartbeat stats, and throughput (rollouts finished per
// minute) measured on the newest rollouts' latest attempts, so the page stays fast on a store of any size.
import { get, newestRollouts } from "../api.js";
import { badge, fmtDuration, fmtNumber, fmtTime, h, replace, routeLink } from "../dom.js";
import { throughputByWorker } from "../throughput.js";

const SAMPLE = 500;

export async function mount(container) {
  const tbody = h("tbody", {});
  const info = h("p", { class: "muted" });
  replace(container, h("h1", {}, "Workers"), info,
    h("table", { id: "workers" }, h("thead", {}, h("tr", {}, ["Worker", "Status", "Current rollout", "Last heartbeat",
      "Last dequeue", "Finished", "Rollouts/min", "Heartbeat stats"].map((t) => h("th", {}, t)))), tbody));
  async function load() {
    const [page, recent] = await Promise.all([get("/workers", { limit: 500, sort_by: "worker_id" }),
      newestRollouts({}, SAMPLE)]);
    const now = Date.now() / 1000;
    const rates = throughputByWorker(recent.items);
    info.textContent = `${page.total} worker(s) · throughput from the ${rates.sampled} newest rollouts` +
      (rates.windowSeconds > 0 ? ` (finished over ${fmtDuration(rates.windowSeconds)})` : "");
    replace(tbody, page.items.map((w) => h("tr", { "data-worker": w.worker_id },
      h("td", {}, w.worker_id), h("td", {}, badge(w.status)),
      h("td", {}, w.current_rollout_id ? routeLink(w.current_rollout_id, "rollout", w.current_rollout_id) : "—"),
      h("td", {}, w.last_heartbeat_time ? `${fmtTime(w.last_heartbeat_time)} (${fmtDuration(now - w.last_heartbeat_time)} ago)` : "—"),
      h("td", {}, fmtTime(w.last_dequeue_time)),
      h("td", { class: "num finished" }, String(rates.byWorker.get(w.worker_id)?.finished ?? 0)),
      h("td", { class: "num throughput" }, fmtNumber(rates.byWorker.get(w.worker_id)?.perMinute ?? null)),
      h("td", { title: JSON.stringify(w.heartbeat_stats ?? {}) }, JSON.stringify(w.heartbeat_stats ?? {}).slice(0, 120)))));
  }
  await load();
  return { refresh: load };
}
