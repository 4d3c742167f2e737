"""LitAgentRunner.iter against a real store: retries, timeouts, hooks, stopping, idling, heartbeats."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from agl_core.emitter import emit_reward
from agl_core.litagent import rollout
from agl_core.semconv import AGL_EXCEPTION
from agl_core.store.base import UNSET, Unset
from agl_core.store.memory import InMemoryLightningStore
from agl_core.tracer import get_active_tracer
from agl_core.types import LLM, Attempt, AttemptedRollout, EnqueueRolloutRequest, Hook, RolloutConfig, Worker

from ._helpers import reward_values, running, wait_until


@pytest.fixture
async def resourced_store(store: InMemoryLightningStore) -> InMemoryLightningStore:
    await store.add_resources({})
    return store


async def enqueue(
    store: InMemoryLightningStore, *inputs: Any, config: RolloutConfig | None = None
) -> list[str]:
    rollouts = await store.enqueue_many_rollouts(
        [EnqueueRolloutRequest(input=i, config=config) for i in inputs]
    )
    return [r.rollout_id for r in rollouts]


async def test_failed_attempts_are_retried_per_rollout_config(
    resourced_store: InMemoryLightningStore,
) -> None:
    store = resourced_store

    @rollout
    def flaky(task: str, rollout: AttemptedRollout) -> float:
        if rollout.attempt.sequence_id < 3:
            raise RuntimeError(f"flake #{rollout.attempt.sequence_id}")
        return 1.0

    config = RolloutConfig(max_attempts=3, retry_condition=["failed"])
    (rollout_id,) = await enqueue(store, "t", config=config)
    with running(flaky, store, max_rollouts=3) as runner:
        await asyncio.wait_for(runner.iter(), 30)
    final = await store.get_rollout_by_id(rollout_id)
    assert final is not None and final.status == "succeeded"
    attempts = await store.query_attempts(rollout_id)
    assert [a.status for a in attempts] == ["failed", "failed", "succeeded"]
    for attempt in attempts[:2]:
        (span,) = await store.query_spans(rollout_id, attempt.attempt_id)
        assert span.name == AGL_EXCEPTION
        assert span.attributes["exception.message"] == f"flake #{attempt.sequence_id}"
    assert reward_values(await store.query_spans(rollout_id, "latest")) == [1.0]


async def test_failure_without_retry_condition_fails_the_rollout(
    resourced_store: InMemoryLightningStore,
) -> None:
    store = resourced_store

    @rollout
    async def broken(task: str) -> float:
        raise ValueError("bad input")

    first, second = await enqueue(store, "a", "b", config=RolloutConfig(max_attempts=3))
    with running(broken, store, max_rollouts=2) as runner:
        await asyncio.wait_for(runner.iter(), 30)
    for rollout_id in (first, second):
        final = await store.get_rollout_by_id(rollout_id)
        assert final is not None and final.status == "failed"
        assert len(await store.query_attempts(rollout_id)) == 1


async def test_hanging_async_agent_times_out_and_is_retried(resourced_store: InMemoryLightningStore) -> None:
    store = resourced_store
    never = asyncio.Event()
    cancelled: list[int] = []

    @rollout
    async def hangs_once(task: str, rollout: AttemptedRollout) -> float:
        if rollout.attempt.sequence_id == 1:
            try:
                await never.wait()
            except asyncio.CancelledError:
                cancelled.append(rollout.attempt.sequence_id)
                raise
        return 1.0

    config = RolloutConfig(timeout_seconds=0.2, max_attempts=2, retry_condition=["timeout"])
    (rollout_id,) = await enqueue(store, "t", config=config)
    with running(hangs_once, store, max_rollouts=2) as runner:
        await asyncio.wait_for(runner.iter(), 30)
    attempts = await store.query_attempts(rollout_id)
    assert [a.status for a in attempts] == ["timeout", "succeeded"]
    assert cancelled == [1]
    (span,) = await store.query_spans(rollout_id, attempts[0].attempt_id)
    assert span.attributes["exception.type"] == "AgentTimeoutError"
    final = await store.get_rollout_by_id(rollout_id)
    assert final is not None and final.status == "succeeded"


async def test_hanging_sync_agent_times_out(resourced_store: InMemoryLightningStore) -> None:
    store = resourced_store
    release = threading.Event()

    @rollout
    def hangs(task: str) -> float:
        release.wait(timeout=30)
        return 1.0

    (rollout_id,) = await enqueue(store, "t", config=RolloutConfig(timeout_seconds=0.2))
    try:
        with running(hangs, store, max_rollouts=1) as runner:
            await asyncio.wait_for(runner.iter(), 30)
    finally:
        release.set()
    final = await store.get_rollout_by_id(rollout_id)
    assert isinstance(final, AttemptedRollout)
    assert (final.status, final.attempt.status) == ("failed", "timeout")


class RecordingHook(Hook):
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.active_tracers: list[Any] = []
        self.end_spans: list[list[Any]] = []

    async def on_rollout_start(self, *, agent: Any, runner: Any, rollout: Any) -> None:
        self.calls.append(("rollout_start", rollout.input))

    async def on_trace_start(self, *, agent: Any, runner: Any, tracer: Any, rollout: Any) -> None:
        self.calls.append(("trace_start", rollout.input))
        self.active_tracers.append(get_active_tracer())

    async def on_trace_end(self, *, agent: Any, runner: Any, tracer: Any, rollout: Any) -> None:
        self.calls.append(("trace_end", rollout.input))

    async def on_rollout_end(self, *, agent: Any, runner: Any, rollout: Any, spans: Any) -> None:
        self.calls.append(("rollout_end", rollout.input))
        self.end_spans.append(list(spans))


class BrokenHook(Hook):
    async def on_rollout_start(self, **kwargs: Any) -> None:
        raise RuntimeError("hook bug")

    async def on_trace_start(self, **kwargs: Any) -> None:
        raise RuntimeError("hook bug")

    async def on_trace_end(self, **kwargs: Any) -> None:
        raise RuntimeError("hook bug")

    async def on_rollout_end(self, **kwargs: Any) -> None:
        raise RuntimeError("hook bug")


async def test_hooks_run_in_order_and_their_errors_are_not_fatal(
    resourced_store: InMemoryLightningStore,
) -> None:
    store = resourced_store
    recorder = RecordingHook()

    @rollout
    def agent(task: str) -> float:
        if task == "fail":
            raise RuntimeError("agent bug")
        return 0.5

    ids = await enqueue(store, "ok", "fail")
    with running(agent, store, hooks=[BrokenHook(), recorder], max_rollouts=2) as runner:
        await asyncio.wait_for(runner.iter(), 30)
    order = ["rollout_start", "trace_start", "trace_end", "rollout_end"]
    assert recorder.calls == [(step, "ok") for step in order] + [(step, "fail") for step in order]
    assert recorder.active_tracers == [runner.tracer, runner.tracer]
    assert reward_values(recorder.end_spans[0]) == [0.5]
    assert [s.name for s in recorder.end_spans[1]] == [AGL_EXCEPTION]
    statuses = [(await store.get_rollout_by_id(i)).status for i in ids]  # type: ignore[union-attr]
    assert statuses == ["succeeded", "failed"]


async def test_max_rollouts_stops_the_loop(resourced_store: InMemoryLightningStore) -> None:
    store = resourced_store

    @rollout
    def agent(task: int) -> float:
        return float(task)

    ids = await enqueue(store, *range(5))
    with running(agent, store, max_rollouts=3) as runner:
        await asyncio.wait_for(runner.iter(), 30)
    statuses = [(await store.get_rollout_by_id(i)).status for i in ids]  # type: ignore[union-attr]
    assert statuses == ["succeeded"] * 3 + ["queuing"] * 2


async def test_runner_never_waits_for_the_poll_interval_while_work_is_queued(
    resourced_store: InMemoryLightningStore,
) -> None:
    store = resourced_store

    @rollout
    async def agent(task: int) -> float:
        return 1.0

    ids = await enqueue(store, *range(40))
    # With an hour-long poll interval, any wait between queued rollouts would blow the 30 s bound.
    with running(agent, store, max_rollouts=40, poll_interval=3600.0) as runner:
        await asyncio.wait_for(runner.iter(), 30)
    finished = await store.wait_for_rollouts(rollout_ids=ids, timeout=0)
    assert [r.status for r in finished] == ["succeeded"] * 40


async def test_runner_picks_up_work_that_arrives_while_it_waits(
    resourced_store: InMemoryLightningStore,
) -> None:
    store = resourced_store
    stop = threading.Event()

    @rollout
    def agent(task: str) -> float:
        return 1.0

    with running(agent, store, poll_interval=0.05) as runner:
        task = asyncio.create_task(runner.iter(event=stop))
        await wait_until(lambda: _worker_status(store, "Worker-0", "idle"))
        (rollout_id,) = await enqueue(store, "late")
        finished = await store.wait_for_rollouts(rollout_ids=[rollout_id], timeout=30)
        stop.set()
        await asyncio.wait_for(task, 30)
    assert [r.status for r in finished] == ["succeeded"]


async def _worker_status(store: InMemoryLightningStore, worker_id: str, status: str) -> bool:
    worker = await store.get_worker_by_id(worker_id)
    return worker is not None and worker.status == status


async def test_stop_event_stops_a_waiting_runner_promptly(resourced_store: InMemoryLightningStore) -> None:
    store = resourced_store
    stop = threading.Event()

    @rollout
    def agent(task: str) -> float:
        return 1.0

    with running(agent, store, poll_interval=3600.0) as runner:
        task = asyncio.create_task(runner.iter(event=stop))
        await wait_until(lambda: _worker_status(store, "Worker-0", "idle"))
        stop.set()
        # The runner waits up to an hour between empty polls; only the event can end it within the bound.
        await asyncio.wait_for(task, 5)


async def test_missing_resources_fail_the_attempt_instead_of_leaving_it_preparing(
    store: InMemoryLightningStore,
) -> None:
    @rollout
    def agent(task: str, llm: LLM) -> float:
        return 1.0

    (none_published,) = await enqueue(store, "no resources at all")
    unknown = await store.enqueue_rollout("bad id", resources_id="rs-does-not-exist")
    with running(agent, store, max_rollouts=2) as runner:
        await asyncio.wait_for(runner.iter(), 30)
    expected = {
        none_published: ("MissingResourceError", "No LLM resource found for parameter `llm`"),
        unknown.rollout_id: ("ResourcesNotFoundError", "'rs-does-not-exist', which are not in the store"),
    }
    for rollout_id, (error, message) in expected.items():
        final = await store.get_rollout_by_id(rollout_id)
        assert isinstance(final, AttemptedRollout)
        assert (final.status, final.attempt.status) == ("failed", "failed")
        (span,) = await store.query_spans(rollout_id)
        assert span.attributes["exception.type"] == error
        assert message in str(span.attributes["exception.message"])


async def test_cancelling_the_runner_fails_the_running_attempt(
    resourced_store: InMemoryLightningStore,
) -> None:
    store = resourced_store
    started = asyncio.Event()

    @rollout
    async def agent(task: str) -> float:
        started.set()
        await asyncio.Event().wait()
        return 1.0

    (rollout_id,) = await enqueue(store, "t")
    with running(agent, store) as runner:
        task = asyncio.create_task(runner.iter())
        await asyncio.wait_for(started.wait(), 30)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 30)
    final = await store.get_rollout_by_id(rollout_id)
    assert isinstance(final, AttemptedRollout)
    assert (final.status, final.attempt.status) == ("failed", "failed")
    (span,) = await store.query_spans(rollout_id)
    assert span.attributes["exception.type"] == "RunnerStoppedError"


async def test_concurrent_runners_share_the_queue_without_mixing_spans(
    resourced_store: InMemoryLightningStore,
) -> None:
    store = resourced_store

    @rollout
    async def agent(task: int) -> None:
        await asyncio.sleep(0)
        emit_reward(float(task))

    ids = await enqueue(store, *range(60))
    stop = threading.Event()
    runners = [running(agent, store, worker_id=i) for i in range(4)]
    entered = [r.__enter__() for r in runners]
    try:
        tasks = [asyncio.create_task(r.iter(event=stop)) for r in entered]
        finished = await store.wait_for_rollouts(rollout_ids=ids, timeout=60)
        stop.set()
        await asyncio.wait_for(asyncio.gather(*tasks), 30)
    finally:
        for r in runners:
            r.__exit__(None, None, None)
    assert [r.status for r in finished] == ["succeeded"] * 60
    for index, rollout_id in enumerate(ids):
        assert reward_values(await store.query_spans(rollout_id)) == [float(index)]
        assert len(await store.query_attempts(rollout_id)) == 1


class CountingStore(InMemoryLightningStore):
    """The real in-memory store, also signalling (across threads) how many worker heartbeats it stored."""

    def __init__(self, needed: int) -> None:
        super().__init__(scan_debounce_seconds=0)
        self.needed = needed
        self.beats = 0
        self.attempt_beats = 0
        self.enough = threading.Event()

    async def update_worker(self, worker_id: str, heartbeat_stats: dict[str, Any] | Unset = UNSET) -> Worker:
        worker = await super().update_worker(worker_id, heartbeat_stats)
        self.beats += 1
        if self.beats >= self.needed and self.attempt_beats >= 1:
            self.enough.set()
        return worker

    async def update_attempt(self, rollout_id: str, attempt_id: str, *args: Any, **kwargs: Any) -> Attempt:
        attempt = await super().update_attempt(rollout_id, attempt_id, *args, **kwargs)
        if "last_heartbeat_time" in kwargs and "status" not in kwargs:
            self.attempt_beats += 1
        return attempt


@pytest.mark.parametrize(("mode", "is_async"), [("thread", True), ("thread", False), ("asyncio", False)])
async def test_heartbeats_reach_the_store_while_the_agent_is_cpu_busy(mode: str, is_async: bool) -> None:
    store = CountingStore(needed=3)
    await store.add_resources({})

    def spin() -> float:
        deadline = time.monotonic() + 20
        total = 0
        while not store.enough.is_set():  # busy CPU work, never yielding to the event loop
            total += sum(range(200))
            if time.monotonic() > deadline:
                raise AssertionError("no heartbeat reached the store while the agent was busy")
        return 1.0

    async def async_body(task: str) -> float:
        return spin()

    def sync_body(task: str) -> float:
        return spin()

    (rollout_id,) = await enqueue(store, "busy")
    with running(
        rollout(async_body if is_async else sync_body),
        store,
        worker_id=5,
        heartbeat_interval=0.02,
        heartbeat_launch_mode=mode,
        max_rollouts=1,
    ) as runner:
        await asyncio.wait_for(runner.iter(), 60)
    final = await store.get_rollout_by_id(rollout_id)
    assert isinstance(final, AttemptedRollout)
    assert final.status == "succeeded"
    assert store.attempt_beats >= 1
    worker = await store.get_worker_by_id("Worker-5")
    assert worker is not None and worker.heartbeat_stats is not None
    assert worker.heartbeat_stats["cpu_count"] >= 1
    assert "rollouts_processed" in worker.heartbeat_stats
