// Throughput per worker: finished attempts per minute, from the newest rollouts (their latest attempts).

/** Map worker_id -> {finished, perMinute} over the rollouts given (each with its latest `attempt`).
 *  The window runs from the earliest start to the latest end among the finished attempts, shared by all
 *  workers so their figures compare; perMinute is null while the window is empty. */
export function throughputByWorker(rollouts) {
  const finished = rollouts.map((r) => r.attempt).filter((a) => a && a.worker_id && a.end_time);
  const byWorker = new Map();
  if (finished.length === 0) return { byWorker, windowSeconds: 0, sampled: rollouts.length };
  const first = Math.min(...finished.map((a) => a.start_time ?? a.end_time));
  const last = Math.max(...finished.map((a) => a.end_time));
  const windowSeconds = Math.max(0, last - first);
  for (const a of finished) byWorker.set(a.worker_id, (byWorker.get(a.worker_id) ?? 0) + 1);
  const rates = new Map();
  for (const [worker, n] of byWorker) {
    rates.set(worker, { finished: n, perMinute: windowSeconds > 0 ? (n * 60) / windowSeconds : null });
  }
  return { byWorker: rates, windowSeconds, sampled: rollouts.length };
}
