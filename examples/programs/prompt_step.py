"""One prompt-optimization step that consumes program rollouts: score each candidate prompt, publish the best.

For each candidate system prompt the step publishes it as the ``prompt`` resource, runs every task once,
turns each rollout's spans into triplets with the trainer's adapter (exact token ids, the reward attached)
and scores the candidate by the mean reward of its triplets; then it publishes the best candidate. It is a
stand-in for APO that runs in seconds on a CPU and needs no optimizer model.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import agl_core as agl
from agl_core.types import EnqueueRolloutRequest, PromptTemplate, Triplet

logger = logging.getLogger(__name__)


class PromptStep(agl.Algorithm):
    """Pick the best of ``candidates`` (system prompts) by the reward of the triplets their rollouts give.

    After :meth:`run`: ``scores`` (candidate -> mean triplet reward), ``triplets`` (candidate -> the
    triplets), ``best`` (the published candidate).
    """

    def __init__(self, candidates: Sequence[str], timeout: float = 300.0) -> None:
        super().__init__()
        self.candidates = list(candidates)
        self.timeout = timeout
        self.scores: dict[str, float] = {}
        self.triplets: dict[str, list[Triplet]] = {}
        self.best: str | None = None

    async def run(self, train_dataset: Any = None, val_dataset: Any = None) -> None:
        """Score every candidate on ``train_dataset`` and publish the best as the ``prompt`` resource."""
        store, adapter = self.get_store(), self.get_adapter()
        base = dict(self.get_initial_resources() or {})
        tasks = list(train_dataset or [])
        for candidate in self.candidates:
            resources = {**base, "prompt": PromptTemplate(template=candidate, engine="f-string")}
            update = await store.add_resources(resources)
            requests = [
                EnqueueRolloutRequest(input=task, mode="train", resources_id=update.resources_id)
                for task in tasks
            ]
            rollouts = await store.enqueue_many_rollouts(requests)
            ids = [rollout.rollout_id for rollout in rollouts]
            finished = await store.wait_for_rollouts(rollout_ids=ids, timeout=self.timeout)
            if len(finished) != len(ids):
                raise TimeoutError(
                    f"only {len(finished)} of {len(ids)} rollouts finished in {self.timeout} s"
                )
            proxy = self.get_llm_proxy()
            if proxy is not None:
                await proxy.flush(timeout=30)  # the proxy writes its spans in the background
            triplets: list[Triplet] = []
            for rollout_id in ids:
                triplets.extend(adapter(list(await store.query_spans(rollout_id, "latest"))))
            rewards = [t.reward for t in triplets if t.reward is not None]
            self.triplets[candidate] = triplets
            self.scores[candidate] = sum(rewards) / len(rewards) if rewards else 0.0
            logger.info(
                "prompt %r: %d triplets, mean reward %.2f", candidate, len(triplets), self.scores[candidate]
            )
        self.best = max(self.candidates, key=lambda c: self.scores[c])
        await store.add_resources({**base, "prompt": PromptTemplate(template=self.best, engine="f-string")})
