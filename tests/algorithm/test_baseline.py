"""Baseline: each sample runs once per epoch, a full queue delays but never skips, results are reported."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest

from agl_core.adapter import TraceAdapter
from agl_core.algorithm import Baseline, FastAlgorithm
from agl_core.emitter import emit_reward
from agl_core.litagent import rollout
from agl_core.runner import LitAgentRunner
from agl_core.store.memory import InMemoryLightningStore
from agl_core.tracer.otel import OtelTracer
from agl_core.types import LLM, PromptTemplate, Span


class SpanNames(TraceAdapter[list[str]]):
    """A real adapter: the names of a rollout's spans; it remembers what it was given."""

    def __init__(self) -> None:
        self.inputs: list[list[Span]] = []

    def adapt(self, source: Sequence[Span]) -> list[str]:
        self.inputs.append(list(source))
        return [span.name for span in source]


async def _queued(store: InMemoryLightningStore) -> int:
    return len(await store.query_rollouts(status_in=["queuing", "requeuing"]))


async def _bounded(condition: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not await condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        await asyncio.sleep(0.002)


async def test_baseline_does_not_skip_samples_when_queue_full() -> None:
    store = InMemoryLightningStore()
    baseline = Baseline(max_queue_length=2, polling_interval=0.05, span_verbosity="none")
    baseline.set_store(store)
    baseline.set_initial_resources({})  # empty resources are still published
    train, val = [f"train-{i}" for i in range(7)], [f"val-{i}" for i in range(3)]
    algorithm = asyncio.create_task(baseline.run(train, val))
    largest_queue = 0
    processed: list[Any] = []
    while len(processed) < len(train) + len(val):
        await _bounded(lambda: _queued_at_least(store, 1))
        queued = await _queued(store)
        largest_queue = max(largest_queue, queued)
        if queued == 2 and len(processed) == 0:  # the queue is full before any rollout was taken
            assert len(await store.query_rollouts()) == 2
        claimed = await store.dequeue_rollout(worker_id="consumer")
        assert claimed is not None
        processed.append((claimed.input, claimed.mode))
        await store.update_attempt(claimed.rollout_id, claimed.attempt.attempt_id, status="succeeded")
    await asyncio.wait_for(algorithm, 20)
    default = await store.get_resources_by_id("default")
    assert default is not None and default.resources == {}
    assert largest_queue == 2
    assert sorted(processed) == sorted([(t, "train") for t in train] + [(v, "val") for v in val])
    assert baseline.summary.enqueued == baseline.summary.finished == 10
    assert baseline.summary.by_status == {"succeeded": 10}


async def _queued_at_least(store: InMemoryLightningStore, count: int) -> bool:
    return await _queued(store) >= count


async def test_baseline_with_runners_reports_rewards_and_runs_the_adapter(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = InMemoryLightningStore()

    @rollout
    async def agent(task: int, prompt_template: PromptTemplate) -> None:
        emit_reward(float(task) / 10)

    adapter = SpanNames()
    baseline = Baseline(n_epochs=2, max_queue_length=3, polling_interval=0.05, span_verbosity="keys")
    baseline.set_store(store)
    baseline.set_adapter(adapter)
    initial = {"prompt": PromptTemplate(template="Q: {q}", engine="f-string")}
    baseline.set_initial_resources(initial)
    assert isinstance(baseline, FastAlgorithm)

    stop = threading.Event()
    runners = [
        LitAgentRunner[Any](OtelTracer(instrument_llm_clients=False), heartbeat_interval=0) for _ in range(2)
    ]
    contexts = [r.run_context(agent=agent, store=store, worker_id=i) for i, r in enumerate(runners)]
    for context in contexts:
        context.__enter__()
    try:
        tasks = [asyncio.create_task(r.iter(event=stop)) for r in runners]
        with caplog.at_level(logging.INFO, logger="agl_core.algorithm.baseline"):
            await asyncio.wait_for(baseline.run(list(range(5)), [5, 6]), 60)
        stop.set()
        await asyncio.wait_for(asyncio.gather(*tasks), 30)
    finally:
        for context in contexts:
            context.__exit__(None, None, None)

    resources = await store.get_resources_by_id("default")
    assert resources is not None and resources.resources == initial
    inputs = Counter(r.input for r in await store.query_rollouts())
    assert inputs == Counter({i: 2 for i in range(7)})
    summary = baseline.summary
    assert (summary.enqueued, summary.finished, summary.by_status) == (14, 14, {"succeeded": 14})
    assert summary.mean_reward == pytest.approx(sum(i / 10 for i in range(7)) * 2 / 14)
    assert len(adapter.inputs) == 14
    assert all(len(spans) == 1 and spans[0].name == "agentlightning.annotation" for spans in adapter.inputs)
    assert "Baseline epoch 2/2 done: 14 rollouts finished {'succeeded': 14}" in caplog.text
    assert "['agentlightning.reward.0.name', 'agentlightning.reward.0.value']" in caplog.text
    assert "adapter SpanNames produced 1 items" in caplog.text


async def test_baseline_logs_attribute_values_at_key_values_verbosity(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = InMemoryLightningStore()
    baseline = Baseline(polling_interval=0.05, span_verbosity="key_values")
    baseline.set_store(store)
    algorithm = asyncio.create_task(baseline.run(["only"]))
    await _bounded(lambda: _queued_at_least(store, 1))
    claimed = await store.dequeue_rollout()
    assert claimed is not None
    span = Span.from_attributes(
        attributes={"answer": 42},
        rollout_id=claimed.rollout_id,
        attempt_id=claimed.attempt.attempt_id,
        sequence_id=1,
        name="custom",
    )
    await store.add_span(span)
    await store.update_attempt(claimed.rollout_id, claimed.attempt.attempt_id, status="failed")
    with caplog.at_level(logging.INFO, logger="agl_core.algorithm.baseline"):
        await asyncio.wait_for(algorithm, 20)
    assert "custom {'answer': 42}" in caplog.text
    assert baseline.summary.by_status == {"failed": 1}
    assert baseline.summary.mean_reward is None


async def test_baseline_without_data_logs_and_returns(caplog: pytest.LogCaptureFixture) -> None:
    store = InMemoryLightningStore()
    baseline = Baseline()
    baseline.set_store(store)
    baseline.set_initial_resources({"llm": LLM(endpoint="http://x/v1", model="m")})
    with caplog.at_level(logging.ERROR):
        await baseline.run(None, [])
    assert "nothing to run" in caplog.text
    assert len(await store.query_rollouts()) == 0
    assert await store.get_latest_resources() is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_epochs": 0}, "n_epochs"),
        ({"train_split": 1.0}, "train_split"),
        ({"train_split": 0.0}, "train_split"),
        ({"polling_interval": 0}, "polling_interval"),
        ({"max_queue_length": 0}, "max_queue_length"),
        ({"span_verbosity": "all"}, "span_verbosity"),
    ],
)
def test_baseline_validates_its_options(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Baseline(**kwargs)
