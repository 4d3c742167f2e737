// Training: reward per resource version and over time, success rate, rollouts/s and tokens, computed from
// the most recent rollouts (so the page stays fast on a store of any size).
import { get, mapLimited, newestRollouts } from "../api.js";
import { barChart, lineChart } from "../chart.js";
import { fmtNumber, fmtTime, h, replace } from "../dom.js";
import { rewardsOf } from "../rewards.js";
import { llmCall } from "../spans.js";

const SAMPLE = 300;
const TOKEN_SAMPLE = 50;
const tokenCache = new Map();

async function tokensOf(rollout) {
  if (tokenCache.has(rollout.rollout_id)) return tokenCache.get(rollout.rollout_id);
  const page = await get("/spans", { rollout_id: rollout.rollout_id, attempt_id: "latest", limit: 1000 });
  let input = 0, output = 0;
  for (const span of page.items) {
    const call = llmCall(span);
    if (call) {
      input += Number(call.usage.input) || 0;
      output += Number(call.usage.output) || 0;
    }
  }
  const result = { input, output };
  if (["succeeded", "failed", "cancelled"].includes(rollout.status)) tokenCache.set(rollout.rollout_id, result);
  return result;
}

function card(label, value, id) {
  return h("div", { class: "card", id }, h("div", { class: "value" }, value), h("div", { class: "label" }, label));
}

export async function mount(container) {
  const body = h("div", {});
  replace(container, h("h1", {}, "Training"), body);

  async function load() {
    const [stats, recent] = await Promise.all([get("/statistics"),
      newestRollouts({}, SAMPLE)]);
    const rollouts = recent.items;
    const rewards = await rewardsOf(rollouts);
    const finished = rollouts.filter((r) => r.end_time);
    const succeeded = finished.filter((r) => r.status === "succeeded").length;
    const ends = finished.map((r) => r.end_time);
    const starts = rollouts.map((r) => r.start_time).filter(Boolean);
    const span = ends.length ? Math.max(...ends) - Math.min(...starts) : 0;
    const tokens = await mapLimited(finished.slice(0, TOKEN_SAMPLE), 6, tokensOf);
    const tokIn = tokens.reduce((s, t) => s + t.input, 0), tokOut = tokens.reduce((s, t) => s + t.output, 0);
    const withReward = rollouts.map((r, i) => ({ r, reward: rewards[i] })).filter((x) => x.reward !== null);
    const mean = withReward.length ? withReward.reduce((s, x) => s + x.reward, 0) / withReward.length : null;

    const byVersion = new Map();
    for (const { r, reward } of withReward) {
      const key = r.resources_id ?? "(none)";
      const v = byVersion.get(key) || { sum: 0, n: 0, first: Infinity };
      v.sum += reward;
      v.n += 1;
      v.first = Math.min(v.first, r.start_time ?? Infinity);
      byVersion.set(key, v);
    }
    const bars = [...byVersion.entries()].sort((a, b) => a[1].first - b[1].first)
      .map(([label, v]) => ({ label, value: v.sum / v.n }));
    const timed = withReward.filter((x) => x.r.end_time).sort((a, b) => a.r.end_time - b.r.end_time);
    const bucket = Math.max(1, Math.ceil(timed.length / 40));
    const points = [];
    for (let i = 0; i < timed.length; i += bucket) {
      const chunk = timed.slice(i, i + bucket);
      points.push({ x: chunk[chunk.length - 1].r.end_time, y: chunk.reduce((s, x) => s + x.reward, 0) / chunk.length });
    }
    replace(body,
      h("p", { class: "muted" }, `From the ${rollouts.length} most recent of ${stats.total_rollouts} rollouts` +
        ` (tokens: the ${tokens.length} most recent finished ones).`),
      h("div", { class: "cards" },
        card("rollouts in store", String(stats.total_rollouts), "card-rollouts"),
        card("mean reward", fmtNumber(mean), "card-reward"),
        card("success rate", finished.length ? `${Math.round((succeeded / finished.length) * 100)}%` : "—", "card-success"),
        card("rollouts/s", span > 0 ? fmtNumber(finished.length / span) : "—", "card-rate"),
        card("tokens in / out", `${tokIn} / ${tokOut}`, "card-tokens"),
        card("spans in store", String(stats.total_spans), "card-spans")),
      h("h2", {}, "Reward over time"),
      points.length ? lineChart("reward-time", points, fmtTime) : h("p", { class: "muted" }, "No rewards yet."),
      h("h2", {}, "Mean reward per resources version"),
      bars.length ? barChart("reward-version", bars) : h("p", { class: "muted" }, "No rewards yet."));
  }
  await load();
  return { refresh: load };
}
