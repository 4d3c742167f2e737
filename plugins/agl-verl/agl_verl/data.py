"""Store rollouts → verl V1 TransferQueue rows: enqueue a batch, wait with a timeout, apply the policy.

:class:`BatchCollector` is the rollout half of a training step: it replaces verl's own generation. It
runs on CPU and is what the plugin's tests exercise against a real store and real verl.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from agl_core.adapter import LlmProxyTraceToTriplet, TraceToTripletBase
from agl_core.store import LightningStore
from agl_core.types import EnqueueRolloutRequest, Rollout, RolloutConfig, RolloutMode, Triplet
from agl_verl.config import VerlConfig
from agl_verl.samples import Sample, SampleStats, triplets_to_samples

__all__ = ["BatchCollector", "CollectedBatch", "RolloutHandle", "TqBatch", "to_transfer_queue"]

logger = logging.getLogger("agl_core.algorithm.verl.data")


@dataclass(frozen=True)
class RolloutHandle:
    """An enqueued rollout and the group (task) it belongs to."""

    rollout_id: str
    uid: str
    task_index: int


@dataclass
class CollectedBatch:
    """Samples of one step's finished rollouts plus the metrics describing what happened."""

    samples: list[Sample]
    metrics: dict[str, float] = field(default_factory=dict)


def _final_reward(triplets: Sequence[Triplet]) -> float | None:
    """The rollout's reward: the last non-None triplet reward (Agent Lightning's rule)."""
    for triplet in reversed(triplets):
        if triplet.reward is not None:
            return float(triplet.reward)
    return None


class BatchCollector:
    """Runs one batch of tasks through the agl store and returns token-level samples.

    Args:
        store: Where tasks are enqueued and spans are read.
        config: Sampling counts, timeouts, failure policy and credit assignment.
        adapter: Spans → triplets; defaults to ``LlmProxyTraceToTriplet(agent_match=config.agent_match)``
            (the proxy-recorded token ids are the ones vLLM sampled).
    """

    def __init__(
        self, store: LightningStore, config: VerlConfig, adapter: TraceToTripletBase | None = None
    ) -> None:
        self.store = store
        self.config = config
        self.adapter = (
            adapter if adapter is not None else LlmProxyTraceToTriplet(agent_match=config.agent_match)
        )

    async def enqueue(
        self,
        tasks: Sequence[Any],
        *,
        mode: RolloutMode,
        n: int,
        resources_id: str | None = None,
        uids: Sequence[str] | None = None,
    ) -> list[RolloutHandle]:
        """Enqueue ``n`` rollouts per task in one store call; the ``n`` copies share a group uid.

        ``uids``: the group uid of each task (verl's prompt uids); new random ones when None.
        """
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}.")
        if uids is not None and len(uids) != len(tasks):
            raise ValueError(f"{len(uids)} uids for {len(tasks)} tasks.")
        rollout_config = RolloutConfig(
            timeout_seconds=self.config.rollout_timeout_s, unresponsive_seconds=self.config.rollout_timeout_s
        )
        requests: list[EnqueueRolloutRequest] = []
        groups: list[tuple[str, int]] = []
        for task_index, task in enumerate(tasks):
            uid = uuid.uuid4().hex if uids is None else uids[task_index]
            for _ in range(n):
                requests.append(
                    EnqueueRolloutRequest(
                        input=task,
                        mode=mode,
                        resources_id=resources_id,
                        config=rollout_config,
                        metadata={"uid": uid, "task_index": task_index, "is_train": mode == "train"},
                    )
                )
                groups.append((uid, task_index))
        rollouts = await self.store.enqueue_many_rollouts(requests)
        return [
            RolloutHandle(r.rollout_id, uid, index) for r, (uid, index) in zip(rollouts, groups, strict=True)
        ]

    async def collect(
        self,
        handles: Sequence[RolloutHandle],
        *,
        timeout: float,
        flush: Callable[[], Awaitable[object]] | None = None,
    ) -> CollectedBatch:
        """Wait up to ``timeout`` seconds, cancel what is unfinished, and build samples by the policy.

        ``flush`` runs after the wait and before any span is read: the LLM proxy writes its spans from
        a background task, so a rollout can finish before its last call's span is in the store (pass
        ``lambda: proxy.flush(timeout=...)``).

        ``drop`` leaves out timed-out and failed rollouts; ``zero_fill`` keeps whatever calls they
        recorded with reward 0. Succeeded rollouts without a reward get ``reward_fillna_value``. Nothing
        here raises for a bad rollout: problems become metrics.
        """
        ids = [h.rollout_id for h in handles]
        finished = await self.store.wait_for_rollouts(rollout_ids=ids, timeout=timeout)
        if flush is not None:
            await flush()
        by_id: dict[str, Rollout] = {r.rollout_id: r for r in finished}
        counts = {"n_rollouts": len(handles), "n_succeeded": 0, "n_failed": 0, "n_timed_out": 0}
        counts |= {"n_dropped": 0, "n_zero_filled": 0, "n_w_trace": 0, "n_w_reward": 0}
        stats = SampleStats()
        samples: list[Sample] = []
        rewards: list[float] = []
        for handle in handles:
            rollout = by_id.get(handle.rollout_id)
            if rollout is None:
                counts["n_timed_out"] += 1
                await self._cancel(handle.rollout_id)
                ok = False
            elif rollout.status == "succeeded":
                counts["n_succeeded"] += 1
                ok = True
            else:
                counts["n_failed"] += 1
                ok = False
            if not ok and self.config.failed_rollout_policy == "drop":
                counts["n_dropped"] += 1
                continue
            triplets = await self._triplets(handle.rollout_id)
            reward = _final_reward(triplets)
            counts["n_w_trace"] += bool(triplets)
            counts["n_w_reward"] += reward is not None
            if not ok:
                counts["n_zero_filled"] += 1
                reward = 0.0
            elif reward is None:
                reward = self.config.reward_fillna_value
            rewards.append(reward)
            samples += triplets_to_samples(
                triplets,
                reward=reward,
                uid=handle.uid,
                rollout_id=handle.rollout_id,
                credit=self.config.credit,
                stats=stats,
            )
        metrics = {f"agl/{key}": float(value) for key, value in counts.items()}
        metrics["agl/n_calls"] = float(stats.n_calls)
        metrics["agl/n_samples"] = float(stats.n_samples)
        metrics["agl/n_trajectory_mismatches"] = float(stats.n_trajectory_mismatches)
        metrics["agl/reward"] = sum(rewards) / len(rewards) if rewards else 0.0
        return CollectedBatch(samples, metrics)

    async def run(
        self, tasks: Sequence[Any], *, mode: RolloutMode, n: int, resources_id: str | None = None
    ) -> CollectedBatch:
        """:meth:`enqueue` then :meth:`collect` with ``config.effective_batch_timeout_s``."""
        handles = await self.enqueue(tasks, mode=mode, n=n, resources_id=resources_id)
        return await self.collect(handles, timeout=self.config.effective_batch_timeout_s)

    async def _cancel(self, rollout_id: str) -> None:
        try:
            await self.store.update_rollout(rollout_id, status="cancelled")
        except Exception:  # a store error must not stop training; the rollout is dropped anyway
            logger.warning("Could not cancel timed-out rollout %s", rollout_id, exc_info=True)

    async def _triplets(self, rollout_id: str) -> list[Triplet]:
        spans = (await self.store.query_spans(rollout_id, "latest")).items
        try:
            return self.adapter.adapt(spans)
        except Exception:
            logger.warning(
                "Adapter failed on rollout %s; it contributes no sample", rollout_id, exc_info=True
            )
            return []


@dataclass
class TqBatch:
    """Samples as TransferQueue rows the way verl's ``AgentLoopWorkerTQ`` writes them (V1 trainer).

    ``keys[i]`` is ``{uid}_{session}_{index}`` (session: the rollout's place in its group; index: the
    sample's place in the rollout, so the highest is the rollout's final output, whose reward verl's V1
    GRPO uses and whose advantage it gives the rollout's other samples); ``fields[i]`` and ``tags[i]``
    are its TransferQueue fields and tags; ``samples[i]`` the (truncated) sample they came from.
    """

    keys: list[str] = field(default_factory=list)
    fields: list[dict[str, Any]] = field(default_factory=list)
    tags: list[dict[str, Any]] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    metrics: dict[str, float] = field(default_factory=dict)


def to_transfer_queue(
    samples: Sequence[Sample], *, step: int, max_prompt_length: int, max_response_length: int
) -> TqBatch:
    """Samples → verl V1's TransferQueue rows for training step ``step``.

    Fields: ``prompts``, ``responses``, ``response_mask`` (= ``loss_mask``), ``input_ids``,
    ``position_ids`` (0..n-1: no padding inside a row), ``rollout_log_probs`` (the sampler's, NaN where
    unknown), ``rm_scores`` (the reward on the last response token), ``num_turns`` (calls merged into
    the sample), ``uid``, ``session_id``, ``global_steps``, ``extra_fields`` (the weight version
    ``step - 1``: synced at the end of the previous step), ``multi_modal_inputs`` (empty). Tags: status,
    lengths, versions (verl's staleness control and batch balancing read them).
    A prompt longer than ``max_prompt_length`` leaves its sample out (``agl/n_dropped_long_prompts``);
    a response longer than ``max_response_length`` is cut (``agl/n_truncated_responses``).
    """
    import torch

    out = TqBatch()
    sessions: dict[str, dict[str, int]] = {}
    n_in_session: dict[tuple[str, int], int] = {}
    n_long = n_cut = 0
    for sample in samples:
        if len(sample.prompt_ids) > max_prompt_length:
            n_long += 1
            continue
        n_cut += len(sample.response_ids) > max_response_length
        length = min(len(sample.response_ids), max_response_length)
        logprobs = list(sample.response_logprobs[:length])
        logprobs += [float("nan")] * (length - len(logprobs))
        sample = replace(
            sample,
            response_ids=sample.response_ids[:length],
            response_mask=sample.response_mask[:length],
            response_logprobs=logprobs,
        )
        group = sessions.setdefault(sample.uid, {})
        session = group.setdefault(sample.rollout_id, len(group))
        index = n_in_session.get((sample.uid, session), 0)
        n_in_session[(sample.uid, session)] = index + 1
        prompts = torch.tensor(sample.prompt_ids, dtype=torch.int64)
        responses = torch.tensor(sample.response_ids, dtype=torch.int64)
        response_mask = torch.tensor(sample.response_mask, dtype=torch.int64)
        rm_scores = torch.zeros(length, dtype=torch.float32)
        rm_scores[-1] = sample.reward
        input_ids = torch.cat([prompts, responses])
        versions = {"min_global_steps": step - 1, "max_global_steps": step - 1}
        out.keys.append(f"{sample.uid}_{session}_{index}")
        out.samples.append(sample)
        out.fields.append(
            {
                "prompts": prompts,
                "responses": responses,
                "response_mask": response_mask,
                "loss_mask": response_mask,
                "input_ids": input_ids,
                "position_ids": torch.arange(len(input_ids), dtype=torch.int64),
                "rollout_log_probs": torch.tensor(logprobs, dtype=torch.float32),
                "rm_scores": rm_scores,
                "num_turns": sample.n_calls,
                "uid": sample.uid,
                "session_id": session,
                "global_steps": step,
                "extra_fields": dict(versions),
                "multi_modal_inputs": {},
            }
        )
        lengths = {"prompt_len": len(prompts), "response_len": length, "seq_len": len(input_ids)}
        out.tags.append({"status": "success", **lengths, "global_steps": step, **versions})
    out.metrics = {
        "agl/n_dropped_long_prompts": float(n_long),
        "agl/n_truncated_responses": float(n_cut),
        "agl/mean_response_length": (
            sum(len(s.response_ids) for s in out.samples) / len(out.samples) if out.samples else 0.0
        ),
    }
    return out


def task_list(dataset: Any) -> list[Mapping[str, Any] | Any]:
    """A dataset (anything with ``len`` and indexing) as a list of tasks."""
    return [dataset[i] for i in range(len(dataset))]
