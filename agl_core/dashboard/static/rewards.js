// Rewards of rollouts, read from their reward spans (latest attempt) and cached once the rollout is final.
import { get, mapLimited } from "./api.js";
import { finalReward } from "./spans.js";

const FINAL = new Set(["succeeded", "failed", "cancelled"]);
const cache = new Map(); // rollout_id -> reward (number or null), final rollouts only

async function rewardOf(rollout) {
  const id = rollout.rollout_id;
  if (cache.has(id)) return cache.get(id);
  if (!rollout.attempt) return null; // never started: no spans yet
  let reward = null;
  for (const name of ["agentlightning.annotation", "agentlightning.reward"]) {
    const page = await get("/spans", { rollout_id: id, attempt_id: "latest", name, limit: 100 });
    reward = finalReward(page.items);
    if (reward !== null) break;
  }
  if (FINAL.has(rollout.status)) cache.set(id, reward);
  return reward;
}

/** Rewards of the given rollouts (null where none), at most 6 requests in flight. */
export function rewardsOf(rollouts) {
  return mapLimited(rollouts, 6, rewardOf);
}
