"""`Baseline`: run every sample through the agent, keep the queue short, report what came back."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from agl_core.algorithm.fast import FastAlgorithm
from agl_core.algorithm.utils import with_llm_proxy, with_store
from agl_core.types import FINISHED_ROLLOUT_STATUSES, QUEUING_ROLLOUT_STATUSES

if TYPE_CHECKING:
    from agl_core.store.base import LightningStore
    from agl_core.types import Dataset, EnqueueRolloutRequest, Rollout, RolloutMode, Span

__all__ = ["Baseline", "BaselineSummary"]

logger = logging.getLogger(__name__)

SpanVerbosity = Literal["keys", "key_values", "none"]
_VERBOSITIES: tuple[str, ...] = ("keys", "key_values", "none")
_MIN_WAIT_SECONDS = 0.001
_INITIAL_FULL_QUEUE_WAIT_SECONDS = 0.05


@dataclass
class BaselineSummary:
    """What one :meth:`Baseline.run` saw: finished rollouts by status and their final rewards."""

    enqueued: int = 0
    finished: int = 0
    by_status: dict[str, int] = field(default_factory=dict)
    rewards: list[float] = field(default_factory=list)

    @property
    def mean_reward(self) -> float | None:
        """Mean final reward of the rollouts that reported one, or None."""
        return sum(self.rewards) / len(self.rewards) if self.rewards else None


class Baseline(FastAlgorithm):
    """Enqueue every train and val sample once per epoch, keep the queue short and report the results.

    No training happens: it is the algorithm ``Trainer.dev()`` uses to check an agent end to end. Each
    finished rollout is logged (its attempts and spans at ``span_verbosity``) and its latest attempt's
    spans are passed through the adapter when one is set.

    Unlike Agent Lightning 0.3, results are harvested with ``store.wait_for_rollouts`` and one query per
    wake-up over the rollouts still in flight, instead of one poller per rollout calling
    ``get_rollout_by_id`` every ``polling_interval``. Waits back off from a millisecond and reset whenever
    a rollout finishes; while the queue is full they stay under half the time the runners were seen to need
    to drain it (and under ``polling_interval``), so runners are not left without work. A full queue
    delays the next sample, never skips it.

    Args:
        n_epochs: Passes over the data (>= 1).
        train_split: Kept for compatibility; must be strictly between 0 and 1 and is otherwise unused.
        polling_interval: Longest wait in seconds between two checks of the queue (> 0).
        max_queue_length: At most this many of this algorithm's rollouts wait in the queue at once (>= 1).
        span_verbosity: ``"keys"`` logs span names and attribute keys, ``"key_values"`` also the values,
            ``"none"`` one line per rollout.
    """

    def __init__(
        self,
        *,
        n_epochs: int = 1,
        train_split: float = 0.5,
        polling_interval: float = 5.0,
        max_queue_length: int = 4,
        span_verbosity: SpanVerbosity = "keys",
    ) -> None:
        if not isinstance(n_epochs, int) or n_epochs < 1:
            raise ValueError(f"n_epochs must be an integer >= 1, got {n_epochs!r}.")
        if not 0.0 < train_split < 1.0:
            raise ValueError(f"train_split must be strictly between 0 and 1, got {train_split!r}.")
        if polling_interval <= 0:
            raise ValueError(f"polling_interval must be > 0 seconds, got {polling_interval!r}.")
        if not isinstance(max_queue_length, int) or max_queue_length < 1:
            raise ValueError(f"max_queue_length must be an integer >= 1, got {max_queue_length!r}.")
        if span_verbosity not in _VERBOSITIES:
            raise ValueError(f"span_verbosity must be one of {_VERBOSITIES}, got {span_verbosity!r}.")
        self.n_epochs = n_epochs
        self.train_split = train_split
        self.polling_interval = float(polling_interval)
        self.max_queue_length = max_queue_length
        self.span_verbosity: SpanVerbosity = span_verbosity
        self.summary = BaselineSummary()
        self._completion_gap: float | None = None
        self._last_completion: float | None = None

    @with_llm_proxy()
    @with_store
    async def run(
        self,
        store: LightningStore,
        llm_proxy: Any,
        train_dataset: Dataset[Any] | None = None,
        val_dataset: Dataset[Any] | None = None,
    ) -> None:
        """Run ``n_epochs`` passes over train then val samples (mode ``"train"``/``"val"``)."""
        samples = _tagged_samples(train_dataset, "train") + _tagged_samples(val_dataset, "val")
        if not samples:
            logger.error("Baseline has nothing to run: train_dataset and val_dataset are both empty or None.")
            return
        initial_resources = self.get_initial_resources()
        if initial_resources is not None:
            await store.update_resources("default", initial_resources)
        self.summary = BaselineSummary()
        self._completion_gap = None
        self._last_completion = None
        in_flight: dict[str, None] = {}
        for epoch in range(self.n_epochs):
            position = 0
            while position < len(samples):
                room = await self._wait_for_room(store, in_flight)
                batch = samples[position : position + room]
                for rollout in await store.enqueue_many_rollouts(_requests(batch)):
                    in_flight[rollout.rollout_id] = None
                position += len(batch)
                self.summary.enqueued += len(batch)
            await self._drain(store, in_flight)
            logger.info(
                "Baseline epoch %d/%d done: %d rollouts finished %s, mean reward %s.",
                epoch + 1,
                self.n_epochs,
                self.summary.finished,
                dict(sorted(self.summary.by_status.items())),
                _format_reward(self.summary.mean_reward),
            )

    async def _wait_for_room(self, store: LightningStore, in_flight: dict[str, None]) -> int:
        """Harvest finished rollouts until fewer than ``max_queue_length`` are queued; return the room."""
        wait = _MIN_WAIT_SECONDS
        while True:
            queued = await self._refresh(store, in_flight)
            if queued < self.max_queue_length:
                return self.max_queue_length - queued
            finished = await store.wait_for_rollouts(rollout_ids=list(in_flight), timeout=wait)
            if finished:
                await self._harvest(store, finished, in_flight)
                wait = _MIN_WAIT_SECONDS
            else:
                wait = min(wait * 2, self._full_queue_wait_cap())

    def _full_queue_wait_cap(self) -> float:
        """Longest wait while the queue is full: half the time the runners need to drain it, as observed.

        A full queue of ``max_queue_length`` rollouts lasts about that many completion gaps, so checking
        twice as often refills it before any runner goes idle, while slow agents are not polled needlessly.
        """
        if self._completion_gap is None:
            return min(self.polling_interval, _INITIAL_FULL_QUEUE_WAIT_SECONDS)
        drain_time = self._completion_gap * self.max_queue_length
        return max(_MIN_WAIT_SECONDS, min(self.polling_interval, drain_time / 2))

    def _observe_completions(self, count: int) -> None:
        """Track the average time between finished rollouts (an exponential moving average)."""
        now = time.monotonic()
        if self._last_completion is not None and count > 0:
            gap = (now - self._last_completion) / count
            previous = self._completion_gap
            self._completion_gap = gap if previous is None else 0.8 * previous + 0.2 * gap
        self._last_completion = now

    async def _refresh(self, store: LightningStore, in_flight: dict[str, None]) -> int:
        """Harvest the finished in-flight rollouts; return how many of the others are still queued."""
        if not in_flight:
            return 0
        current = await store.query_rollouts(rollout_id_in=list(in_flight))
        finished = [r for r in current if r.status in FINISHED_ROLLOUT_STATUSES]
        if finished:
            await self._harvest(store, finished, in_flight)
        return sum(1 for r in current if r.status in QUEUING_ROLLOUT_STATUSES)

    async def _drain(self, store: LightningStore, in_flight: dict[str, None]) -> None:
        """Wait for every in-flight rollout to finish, harvesting as they do."""
        wait = _MIN_WAIT_SECONDS
        while in_flight:
            finished = await store.wait_for_rollouts(rollout_ids=list(in_flight), timeout=wait)
            if finished:
                await self._harvest(store, finished, in_flight)
                wait = _MIN_WAIT_SECONDS
            else:
                wait = min(wait * 2, self.polling_interval)

    async def _harvest(
        self, store: LightningStore, finished: Sequence[Rollout], in_flight: dict[str, None]
    ) -> None:
        self._observe_completions(sum(1 for r in finished if r.rollout_id in in_flight))
        for rollout in finished:
            if rollout.rollout_id not in in_flight:
                continue
            del in_flight[rollout.rollout_id]
            try:
                await self._report(store, rollout)
            except Exception:
                logger.exception("Baseline could not report on rollout %s.", rollout.rollout_id)

    async def _report(self, store: LightningStore, rollout: Rollout) -> None:
        """Log one finished rollout and pass its latest attempt's spans through the adapter."""
        from agl_core.emitter import find_final_reward

        spans = list(await store.query_spans(rollout.rollout_id, "latest"))
        reward = find_final_reward(spans)
        summary = self.summary
        summary.finished += 1
        summary.by_status[rollout.status] = summary.by_status.get(rollout.status, 0) + 1
        if reward is not None:
            summary.rewards.append(reward)
        logger.info(
            "Rollout %s (%s) finished %s with %d spans, final reward %s.",
            rollout.rollout_id,
            rollout.mode or "no mode",
            rollout.status,
            len(spans),
            _format_reward(reward),
        )
        if self.span_verbosity != "none":
            attempts = await store.query_attempts(rollout.rollout_id)
            for attempt in attempts:
                logger.info(
                    "  attempt #%d %s: %s on %s",
                    attempt.sequence_id,
                    attempt.attempt_id,
                    attempt.status,
                    attempt.worker_id or "no worker",
                )
            for span in spans:
                logger.info("  span #%d %s %s", span.sequence_id, span.name, self._describe_attributes(span))
        adapter = self._adapter_or_none()
        if adapter is None or not spans:
            return
        try:
            adapted = adapter(spans)
        except Exception as exc:
            logger.warning(
                "Adapter %s failed on rollout %s: %s", type(adapter).__name__, rollout.rollout_id, exc
            )
            return
        if self.span_verbosity == "key_values":
            logger.info("  adapter %s output: %r", type(adapter).__name__, adapted)
        elif self.span_verbosity == "keys":
            produced = f"{len(adapted)} items" if hasattr(adapted, "__len__") else type(adapted).__name__
            logger.info("  adapter %s produced %s", type(adapter).__name__, produced)

    def _describe_attributes(self, span: Span) -> str:
        if self.span_verbosity == "key_values":
            return repr(dict(span.attributes))
        return repr(sorted(span.attributes))

    def _adapter_or_none(self) -> Any:
        try:
            return self.get_adapter()
        except ValueError:
            return None


def _tagged_samples(dataset: Dataset[Any] | None, mode: RolloutMode) -> list[tuple[Any, RolloutMode]]:
    if dataset is None:
        return []
    return [(dataset[i], mode) for i in range(len(dataset))]


def _requests(batch: Sequence[tuple[Any, RolloutMode]]) -> list[EnqueueRolloutRequest]:
    from agl_core.types import EnqueueRolloutRequest

    return [EnqueueRolloutRequest(input=sample, mode=mode) for sample, mode in batch]


def _format_reward(reward: float | None) -> str:
    return "n/a" if reward is None else f"{reward:.4g}"
