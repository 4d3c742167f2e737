"""Store rollouts → verl ``DataProto``: enqueue a batch, wait with a timeout, apply the failure policy, pad.

:class:`BatchCollector` is the rollout half of a training step: it replaces verl's own generation. It
runs on CPU and is what the plugin's tests exercise against a real store and real verl.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agl_core.adapter import LlmProxyTraceToTriplet, TraceToTripletBase
from agl_core.store import LightningStore
from agl_core.types import EnqueueRolloutRequest, Rollout, RolloutConfig, RolloutMode, Triplet
from agl_verl.config import VerlConfig
from agl_verl.samples import Sample, SampleStats, triplets_to_samples

if TYPE_CHECKING:
    from verl import DataProto

__all__ = ["BatchCollector", "CollectedBatch", "RolloutHandle", "build_data_proto", "write_samples"]

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
        self, tasks: Sequence[Any], *, mode: RolloutMode, n: int, resources_id: str | None = None
    ) -> list[RolloutHandle]:
        """Enqueue ``n`` rollouts per task in one store call; the ``n`` copies share a group uid."""
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}.")
        rollout_config = RolloutConfig(
            timeout_seconds=self.config.rollout_timeout_s, unresponsive_seconds=self.config.rollout_timeout_s
        )
        requests: list[EnqueueRolloutRequest] = []
        groups: list[tuple[str, int]] = []
        for task_index, task in enumerate(tasks):
            uid = uuid.uuid4().hex
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


def build_data_proto(
    samples: Sequence[Sample], *, pad_token_id: int, max_prompt_length: int, max_response_length: int
) -> tuple[DataProto, dict[str, float]]:
    """Pad samples into a verl ``DataProto`` and return it with truncation metrics.

    Tensors: ``prompts`` (left-padded), ``responses`` (right-padded), ``input_ids``, ``attention_mask``,
    ``position_ids`` (``clamp(cumsum(mask) - 1, 0)``), ``response_mask``, ``token_level_scores`` (the
    reward on the last response token), ``agl_rollout_log_probs`` (the sampler's, NaN where unknown),
    ``is_drop_mask`` (prompt was longer than ``max_prompt_length``; its last tokens are kept).
    Non-tensors: ``uid`` (the GRPO group), ``rollout_id``, ``turn_index``.
    Responses longer than ``max_response_length`` are cut, and the reward moves to the last kept token.

    Raises:
        ValueError: ``samples`` is empty (no rollout produced data; see the collector's metrics).
    """
    import numpy as np
    import torch
    from verl import DataProto

    if not samples:
        raise ValueError("No training samples: every rollout failed, timed out or recorded no token ids.")
    prompts = [s.prompt_ids[-max_prompt_length:] for s in samples]
    responses = [s.response_ids[:max_response_length] for s in samples]
    masks = [s.response_mask[:max_response_length] for s in samples]
    width_p = max(len(p) for p in prompts)
    width_r = max(len(r) for r in responses)
    batch = len(samples)
    prompt_t = torch.full((batch, width_p), pad_token_id, dtype=torch.long)
    prompt_att = torch.zeros((batch, width_p), dtype=torch.long)
    resp_t = torch.full((batch, width_r), pad_token_id, dtype=torch.long)
    resp_att = torch.zeros((batch, width_r), dtype=torch.long)
    resp_mask = torch.zeros((batch, width_r), dtype=torch.long)
    scores = torch.zeros((batch, width_r), dtype=torch.float32)
    rollout_lp = torch.full((batch, width_r), float("nan"), dtype=torch.float32)
    for row, (sample, prompt, response, mask) in enumerate(
        zip(samples, prompts, responses, masks, strict=True)
    ):
        prompt_t[row, width_p - len(prompt) :] = torch.tensor(prompt, dtype=torch.long)
        prompt_att[row, width_p - len(prompt) :] = 1
        resp_t[row, : len(response)] = torch.tensor(response, dtype=torch.long)
        resp_att[row, : len(response)] = 1
        resp_mask[row, : len(mask)] = torch.tensor(mask, dtype=torch.long)
        scores[row, len(response) - 1] = sample.reward
        logprobs = (sample.response_logprobs or [float("nan")] * len(response))[: len(response)]
        rollout_lp[row, : len(logprobs)] = torch.tensor(logprobs, dtype=torch.float32)
    attention = torch.cat([prompt_att, resp_att], dim=1)
    tensors = {
        "prompts": prompt_t,
        "responses": resp_t,
        "input_ids": torch.cat([prompt_t, resp_t], dim=1),
        "attention_mask": attention,
        "position_ids": torch.clamp(torch.cumsum(attention, dim=1) - 1, min=0),
        "response_mask": resp_mask,
        "token_level_scores": scores,
        "agl_rollout_log_probs": rollout_lp,
        "is_drop_mask": torch.tensor([len(s.prompt_ids) > max_prompt_length for s in samples]),
    }
    non_tensors = {
        "uid": np.array([s.uid for s in samples], dtype=object),
        "rollout_id": np.array([s.rollout_id for s in samples], dtype=object),
        "turn_index": np.array([s.turn_index for s in samples], dtype=object),
    }
    metrics = {
        "agl/n_truncated_prompts": float(sum(len(s.prompt_ids) > max_prompt_length for s in samples)),
        "agl/n_truncated_responses": float(sum(len(s.response_ids) > max_response_length for s in samples)),
        "agl/mean_response_length": float(resp_att.sum(dim=1).float().mean()),
    }
    return DataProto.from_dict(tensors=tensors, non_tensors=non_tensors), metrics


def write_samples(batch: DataProto, rollout_log_probs: Any, path: str | os.PathLike[str]) -> int:
    """Write one JSON line per sample of an updated batch (``rollout_data_dir``); returns the count.

    Each line: ``rollout_id``, ``uid``, ``turn_index``, ``prompt_ids`` and ``response_ids`` (unpadded),
    ``reward``, ``advantage``, ``rollout_log_probs`` (the sampler's; null where unknown) and
    ``old_log_probs`` (the actor's before the update), per response token. Padding rows (no response
    token in the loss) are left out.
    """
    import math

    tensors = batch.batch
    width_p = tensors["prompts"].shape[1]
    written = 0
    with open(path, "w", encoding="utf-8") as sink:
        for row in range(len(batch)):
            mask = tensors["response_mask"][row]
            if not bool(mask.any()):
                continue
            attention = tensors["attention_mask"][row]
            n_prompt = int(attention[:width_p].sum())
            n_response = int(attention[width_p:].sum())
            rollout_lp = rollout_log_probs[row, :n_response].tolist()
            record = {
                "rollout_id": str(batch.non_tensor_batch["rollout_id"][row]),
                "uid": str(batch.non_tensor_batch["uid"][row]),
                "turn_index": int(batch.non_tensor_batch["turn_index"][row]),
                "prompt_ids": tensors["prompts"][row, width_p - n_prompt :].tolist(),
                "response_ids": tensors["responses"][row, :n_response].tolist(),
                "reward": float(tensors["token_level_scores"][row].sum()),
                "advantage": float(tensors["advantages"][row, 0]),
                "rollout_log_probs": [None if math.isnan(v) else v for v in rollout_lp],
                "old_log_probs": tensors["old_log_probs"][row, :n_response].tolist(),
            }
            sink.write(json.dumps(record) + "\n")
            written += 1
    return written


def task_list(dataset: Any) -> list[Mapping[str, Any] | Any]:
    """A dataset (anything with ``len`` and indexing) as a list of tasks."""
    return [dataset[i] for i in range(len(dataset))]
