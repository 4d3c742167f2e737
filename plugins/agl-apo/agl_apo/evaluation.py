"""Scoring a prompt: enqueue one rollout per task under the prompt's resources id and collect the rewards."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agl_apo.prompts import Experiment
from agl_core.emitter import find_final_reward
from agl_core.types import EnqueueRolloutRequest

if TYPE_CHECKING:
    from agl_core.adapter import TraceToMessages
    from agl_core.store import LightningStore
    from agl_core.types import RolloutMode, RolloutStatus

__all__ = ["BatchEvaluator", "BatchResult", "RolloutOutcome", "cancel_unfinished_rollouts"]

logger = logging.getLogger("agl_core.algorithm.apo.evaluation")

_UNFINISHED: tuple[RolloutStatus, ...] = ("queuing", "requeuing", "preparing", "running")


@dataclass
class RolloutOutcome:
    """One finished rollout: status, final reward and the chat messages of its LLM calls."""

    rollout_id: str
    status: str
    reward: float | None
    task: Any
    conversations: list[list[dict[str, Any]]] = field(default_factory=list)

    def as_experiment(self) -> Experiment:
        """This rollout as the optimizer sees it."""
        return Experiment(self.reward, self.status, self.task, [list(c) for c in self.conversations])


@dataclass
class BatchResult:
    """The outcome of scoring one prompt on a batch of tasks."""

    version: str
    mode: str
    outcomes: list[RolloutOutcome]
    unfinished: int = 0
    """Rollouts that did not finish before the batch timeout (cancelled, not scored)."""

    @property
    def score(self) -> float:
        """Mean final reward over the finished rollouts; a rollout without a reward counts 0."""
        if not self.outcomes:
            return 0.0
        return sum(o.reward or 0.0 for o in self.outcomes) / len(self.outcomes)


class BatchEvaluator:
    """Runs batches of rollouts for prompt candidates through the store.

    Args:
        store: The store runners take rollouts from.
        adapter: Turns a rollout's spans into chat messages for the critic.
        run_id: Recorded in every rollout's metadata (``{"apo": {"run_id": ..., ...}}``).
        timeout: Seconds a batch may take; unfinished rollouts are then cancelled and left out of the score.
        poll_interval: Longest single wait on the store, so progress is reported at least this often.
        on_progress: Called with ``(finished, enqueued)`` deltas as rollouts are enqueued and finish.
    """

    def __init__(
        self,
        store: LightningStore,
        adapter: TraceToMessages,
        *,
        run_id: str,
        timeout: float,
        poll_interval: float = 1.0,
        on_progress: Callable[[int, int], None] | None = None,
    ) -> None:
        self.store = store
        self.adapter = adapter
        self.run_id = run_id
        self.timeout = timeout
        self.poll_interval = poll_interval
        self.on_progress = on_progress
        self.rollouts_enqueued = 0

    def _progress(self, finished: int, enqueued: int) -> None:
        if self.on_progress is not None and (finished or enqueued):
            self.on_progress(finished, enqueued)

    async def evaluate(
        self,
        version: str,
        resources_id: str,
        tasks: Sequence[Any],
        *,
        mode: RolloutMode,
        round_: int,
        purpose: str,
    ) -> BatchResult:
        """Score the prompt published as ``resources_id`` on ``tasks`` (one rollout each)."""
        metadata = {"apo": {"run_id": self.run_id, "version": version, "round": round_, "purpose": purpose}}
        requests = [
            EnqueueRolloutRequest(input=task, mode=mode, resources_id=resources_id, metadata=metadata)
            for task in tasks
        ]
        rollouts = await self.store.enqueue_many_rollouts(requests)
        self.rollouts_enqueued += len(rollouts)
        self._progress(0, len(rollouts))
        ids = [r.rollout_id for r in rollouts]
        tasks_by_id = {r.rollout_id: task for r, task in zip(rollouts, tasks, strict=True)}
        finished = await self._wait(ids)
        unfinished = [rid for rid in ids if rid not in finished]
        if unfinished:
            logger.warning(
                "APO %s: %d of %d rollouts of %s (%s) did not finish within %.0fs; cancelling them and "
                "scoring the rest.",
                self.run_id,
                len(unfinished),
                len(ids),
                version,
                purpose,
                self.timeout,
            )
            await self._cancel(unfinished)
        outcomes = [
            await self._outcome(rid, finished[rid], tasks_by_id[rid]) for rid in ids if rid in finished
        ]
        return BatchResult(version=version, mode=str(mode), outcomes=outcomes, unfinished=len(unfinished))

    async def _wait(self, ids: list[str]) -> dict[str, str]:
        """Wait for ``ids`` until the batch timeout; returns rollout id -> final status of those finished."""
        deadline = time.monotonic() + self.timeout
        done: dict[str, str] = {}
        pending = list(ids)
        while pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            got = await self.store.wait_for_rollouts(
                rollout_ids=pending, timeout=min(remaining, self.poll_interval)
            )
            new = [r for r in got if r.rollout_id not in done]
            for rollout in new:
                done[rollout.rollout_id] = rollout.status
            self._progress(len(new), 0)
            pending = [rid for rid in pending if rid not in done]
        return done

    async def _cancel(self, ids: list[str]) -> None:
        for rollout_id in ids:
            try:
                current = await self.store.get_rollout_by_id(rollout_id)
                if current is not None and current.status in _UNFINISHED:
                    await self.store.update_rollout(rollout_id, status="cancelled")
            except Exception:  # a store hiccup must not lose the scores already collected
                logger.exception("APO %s: could not cancel rollout %s.", self.run_id, rollout_id)

    async def _outcome(self, rollout_id: str, status: str, task: Any) -> RolloutOutcome:
        spans = list(await self.store.query_spans(rollout_id, "latest"))
        reward = find_final_reward(spans) if spans else None
        try:
            samples = self.adapter.adapt(spans)
        except ValueError as exc:
            logger.warning(
                "APO %s: cannot read the LLM messages of rollout %s: %s", self.run_id, rollout_id, exc
            )
            samples = []
        conversations = [list(sample["messages"]) for sample in samples]
        return RolloutOutcome(rollout_id, status, reward, task, conversations)


async def cancel_unfinished_rollouts(store: LightningStore, run_id: str) -> int:
    """Cancel the queued or running rollouts an earlier process of ``run_id`` left; returns how many."""
    leftovers = await store.query_rollouts(status_in=list(_UNFINISHED))
    cancelled = 0
    for rollout in leftovers:
        apo = (rollout.metadata or {}).get("apo")
        if isinstance(apo, dict) and apo.get("run_id") == run_id:
            await store.update_rollout(rollout.rollout_id, status="cancelled")
            cancelled += 1
    return cancelled
