"""The progress display: counts by status, throughput, sampled rewards per resources version, output modes."""

from __future__ import annotations

import asyncio
import io

import pytest

import agl_core as agl
from agl_core.emitter import emit_reward
from agl_core.store.memory import InMemoryLightningStore
from agl_core.trainer.progress import ProgressReporter
from agl_core.types import EnqueueRolloutRequest, PromptTemplate, Span
from tests.trainer._helpers import DrainAlgorithm

TEMPLATE = {"prompt_template": PromptTemplate(template="x", engine="f-string")}


async def finish_with_reward(store: InMemoryLightningStore, worker: str, reward: float) -> None:
    attempted = await store.dequeue_rollout(worker_id=worker)
    assert attempted is not None
    rid, aid = attempted.rollout_id, attempted.attempt.attempt_id
    span = Span.from_core_fields(
        emit_reward(reward, propagate=False),
        rollout_id=rid,
        attempt_id=aid,
        sequence_id=await store.get_next_span_sequence_id(rid, aid),
    )
    await store.add_span(span)
    await store.update_attempt(rid, aid, status="succeeded")


async def test_poll_counts_rollouts_by_status_and_samples_rewards_per_resources_version() -> None:
    store = InMemoryLightningStore()
    v1 = (await store.add_resources(TEMPLATE)).resources_id
    v2 = (await store.add_resources(TEMPLATE)).resources_id
    await store.enqueue_many_rollouts(
        [EnqueueRolloutRequest(input=i, resources_id=v1 if i < 2 else v2) for i in range(4)]
        + [EnqueueRolloutRequest(input=i) for i in range(4, 8)]
    )
    reporter = ProgressReporter(store, stream=io.StringIO())
    first = await reporter.poll()
    assert (first.queued, first.running, first.finished) == (8, 0, 0)

    for reward in (1.0, 0.0, 0.5, 0.25):  # inputs 0, 1 (v1), 2, 3 (v2)
        await finish_with_reward(store, "w", reward)
    failing = await store.dequeue_rollout(worker_id="w")
    assert failing is not None
    await store.update_attempt(failing.rollout_id, failing.attempt.attempt_id, status="failed")
    running = await store.dequeue_rollout(worker_id="w")
    assert running is not None
    cancelled = await store.dequeue_rollout(worker_id="w")
    assert cancelled is not None
    await store.update_rollout(cancelled.rollout_id, status="cancelled")

    second = await reporter.poll()
    assert (second.queued, second.running) == (1, 1)
    assert (second.succeeded, second.failed, second.cancelled) == (4, 1, 1)
    assert second.rewards[v1].mean == pytest.approx(0.5) and second.rewards[v1].count == 2
    assert second.rewards[v2].mean == pytest.approx(0.375) and second.rewards[v2].count == 2
    line = second.line()
    assert "succeeded 4" in line and "failed 1" in line and f"reward[{v1}] 0.5 (n=2)" in line


async def test_plain_lines_when_not_a_terminal_and_a_table_when_live() -> None:
    store = InMemoryLightningStore()
    await store.enqueue_rollout(input=1)
    plain = io.StringIO()
    reporter = ProgressReporter(store, stream=plain, refresh_seconds=0.05)
    reporter.start()
    await reporter.stop()
    lines = plain.getvalue().splitlines()
    assert lines and all(line.startswith("[agl]") for line in lines)
    assert "queued 1" in lines[-1]

    live = io.StringIO()
    reporter = ProgressReporter(store, stream=live, live=True, refresh_seconds=0.05)
    reporter.start()
    await reporter.stop()
    text = live.getvalue()
    assert "queued" in text and "rollouts/s" in text and "agl fit" in text


@agl.rollout
async def reward_agent(task: int, prompt_template: PromptTemplate) -> float:
    return 1.0


@pytest.mark.parametrize("progress", [True, False])
def test_fit_reports_progress_unless_disabled(progress: bool, capsys: pytest.CaptureFixture[str]) -> None:
    trainer = agl.Trainer(
        strategy="shm",
        algorithm=DrainAlgorithm(),
        initial_resources=TEMPLATE,
        runner={"type": "litagent", "poll_interval": 0.01},
        progress=progress,
    )
    trainer.fit(reward_agent, list(range(5)))
    out = capsys.readouterr().out
    if progress:
        assert "succeeded 5" in out.splitlines()[-1]
    else:
        assert "[agl]" not in out


def test_an_agent_that_fails_every_rollout_says_so_with_the_first_error() -> None:
    @agl.rollout
    def broken_agent(task: dict) -> float:
        raise ValueError(f"no model configured for task {task['n']}")

    store = InMemoryLightningStore()
    trainer = agl.Trainer(n_runners=1, store=store, strategy="shm", progress=False)
    trainer.dev(broken_agent, [{"n": n} for n in range(3)])
    stream = io.StringIO()
    reporter = ProgressReporter(store, stream=stream, live=False)
    snapshot = asyncio.run(reporter.poll())
    assert (snapshot.succeeded, snapshot.failed) == (0, 3) and snapshot.all_failed
    assert snapshot.first_error is not None
    assert snapshot.first_error.startswith("ro-")
    assert "ValueError: no model configured for task" in snapshot.first_error
    assert "every rollout failed; first error: ro-" in snapshot.line()
    asyncio.run(reporter.stop())
    assert "every rollout failed; first error:" in stream.getvalue()
