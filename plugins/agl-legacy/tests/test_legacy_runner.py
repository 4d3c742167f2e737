"""0.3's ``LegacyAgentRunner``: a v0.1 worker loop over ``AgentLightningServer``/``DevTaskLoader``."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import pytest

import agl_core as agl
from agl_core.runner.legacy import LegacyAgentRunner


class EchoAgent(agl.LitAgent[Any]):
    """A v0.1-style agent: ``training_rollout(task, rollout_id, resources)`` returning the reward."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, str]] = []

    def training_rollout(self, task: Any, rollout_id: str, resources: Any) -> float:
        self.seen.append((rollout_id, resources["prompt"].format(**task)))
        with agl.operation(name="step"):
            pass
        return 0.75

    async def training_rollout_async(self, task: Any, rollout_id: str, resources: Any) -> float:
        return self.training_rollout(task, rollout_id, resources)


class FailingAgent(agl.LitAgent[Any]):
    async def training_rollout_async(self, task: Any, resources: Any, rollout: Any) -> float:
        raise RuntimeError("agent broke")


_TRACERS: list[agl.OtelTracer] = []


@pytest.fixture(autouse=True)
def _teardown_tracers() -> Iterator[None]:
    """Tear down each test's tracers: a worker's tracer instruments the openai client process-wide."""
    yield
    while _TRACERS:
        _TRACERS.pop().teardown_worker(0)


def _tracer() -> agl.OtelTracer:
    """A tracer set up the way 0.3's legacy trainer set it up for a worker."""
    tracer = agl.OtelTracer()
    tracer.init_worker(0)
    _TRACERS.append(tracer)
    return tracer


def _loader(tasks: list[Any]) -> agl.DevTaskLoader:
    with pytest.warns(DeprecationWarning):
        return agl.DevTaskLoader(
            [
                agl.Task(rollout_id=f"t{i}", input=task, mode="train", resources_id="local")
                for i, task in enumerate(tasks)
            ],
            {"prompt": agl.PromptTemplate(template="Q: {q}", engine="f-string")},
        )


def test_sync_loop_posts_rewards_and_traces() -> None:
    loader = _loader([{"q": "1+1"}, {"q": "2+2"}])
    agent = EchoAgent()
    runner = LegacyAgentRunner(agent, loader, _tracer(), agl.TracerTraceToTriplet(), max_tasks=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)  # the runner itself does not warn
        assert runner.iter() == 2
    assert agent.seen == [("t0", "Q: 1+1"), ("t1", "Q: 2+2")]
    assert [r.rollout_id for r in loader.rollouts] == ["t0", "t1"]
    assert all(r.final_reward == 0.75 for r in loader.rollouts)
    # The tracer's spans of each rollout are posted as its trace.
    for posted in loader.rollouts:
        assert posted.trace is not None
        assert [s["attributes"].get("agentlightning.operation.name") for s in posted.trace] == ["step"]


async def test_async_loop_and_a_failing_agent(caplog: pytest.LogCaptureFixture) -> None:
    loader = _loader([{"q": "x"}])
    runner = LegacyAgentRunner(FailingAgent(), loader, _tracer(), agl.TracerTraceToTriplet(), max_tasks=1)
    assert await runner.iter_async() == 1
    (posted,) = loader.rollouts
    assert posted.rollout_id == "t0" and posted.final_reward is None  # still posted, without a reward
    assert "agent broke" in caplog.text


def test_result_shapes_become_the_posted_rollout() -> None:
    runner = LegacyAgentRunner(EchoAgent(), _loader([{}]), _tracer(), agl.TracerTraceToTriplet())
    triplets = [agl.Triplet(prompt={"token_ids": [1]}, response={"token_ids": [2]}, reward=0.5)]
    from_triplets = runner._to_rollout_object(triplets, "r1")
    assert from_triplets.triplets == triplets and from_triplets.final_reward == 0.5
    legacy = agl.RolloutLegacy(rollout_id="old", final_reward=1.0, metadata={"k": "v"})
    kept = runner._to_rollout_object(legacy, "r2")
    assert kept.rollout_id == "r2" and kept.final_reward == 1.0 and kept.metadata == {"k": "v"}


def test_trainer_legacy_fit_v0_in_dev_mode() -> None:
    from agl_core.trainer.legacy import TrainerLegacy

    loader = _loader([{"q": "a"}, {"q": "b"}])
    agent = EchoAgent()
    trainer = TrainerLegacy(dev=True, n_workers=1, max_tasks=2)
    trainer.fit_v0(agent, train_data=[], dev_data=loader)
    assert [r.rollout_id for r in loader.rollouts] == ["t0", "t1"]
    assert all(r.final_reward == 0.75 and r.trace for r in loader.rollouts)
    with pytest.raises(ValueError, match="dev_data must be provided"):
        TrainerLegacy(dev=True).fit_v0(agent, train_data=[])
    with pytest.raises(ValueError, match="http://"):
        TrainerLegacy().fit_v0(agent, train_data="localhost:1234")


def test_trainer_legacy_runs_worker_processes_against_a_server() -> None:
    import asyncio
    import threading

    from agl_core.trainer.legacy import TrainerLegacy

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    def call(coro: Any, timeout: float = 60) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout)

    with pytest.warns(DeprecationWarning):
        server = agl.AgentLightningServer(host="127.0.0.1", port=0)
    call(server.start())
    try:
        resources_id = call(
            server.update_resources({"prompt": agl.PromptTemplate(template="Q: {q}", engine="f-string")})
        )
        ids = [call(server.queue_task({"q": q}, mode="train", resources_id=resources_id)) for q in ("a", "b")]
        trainer = TrainerLegacy(n_workers=2, max_tasks=1)
        trainer.fit_v0(EchoAgent(), train_data=server.endpoint)
        finished = [call(server.poll_completed_rollout(rollout_id, timeout=30)) for rollout_id in ids]
        assert all(r is not None and r.final_reward == 0.75 for r in finished)
    finally:
        call(server.stop())
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def test_trainer_fit_v0_is_the_legacy_loop_with_the_trainers_settings() -> None:
    """``Trainer.fit_v0`` runs agl-legacy's v0.1 workers with the trainer's tracer and limits.

    0.3's ``Trainer`` was a ``TrainerLegacy`` subclass; agl's is not (a deliberate difference), but the
    agent still sees the `Trainer` as its trainer.
    """
    loader = _loader([{"q": "a"}, {"q": "b"}, {"q": "c"}])
    agent = EchoAgent()
    with pytest.warns(DeprecationWarning):
        trainer = agl.Trainer(dev=True, n_workers=1, max_tasks=2, progress=False)
    assert (trainer.n_workers, trainer.max_tasks) == (1, 2)
    assert trainer.triplet_exporter is trainer.adapter
    trainer.fit_v0(agent, train_data=[], dev_data=loader)
    assert [r.rollout_id for r in loader.rollouts] == ["t0", "t1"]  # max_tasks=2 of the three tasks
    assert all(r.final_reward == 0.75 and r.trace for r in loader.rollouts)
    assert agent.trainer is trainer
    with pytest.raises(ValueError, match="dev_data must be provided"):
        trainer.fit_v0(agent, train_data=[])


def test_trainer_fit_with_a_server_url_runs_fit_v0(caplog: pytest.LogCaptureFixture) -> None:
    """``trainer.fit(agent, "http://server")`` (v0.1's form) warns and runs against the server."""
    import asyncio
    import threading

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    def call(coro: Any, timeout: float = 60) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout)

    with pytest.warns(DeprecationWarning):
        server = agl.AgentLightningServer(host="127.0.0.1", port=0)
    call(server.start())
    try:
        resources_id = call(
            server.update_resources({"prompt": agl.PromptTemplate(template="Q: {q}", engine="f-string")})
        )
        ids = [call(server.queue_task({"q": q}, mode="train", resources_id=resources_id)) for q in ("a", "b")]
        agent = EchoAgent()
        trainer = agl.Trainer(n_runners=1, max_rollouts=2, progress=False)
        trainer.fit(agent, server.endpoint)  # type: ignore[arg-type]
        assert "fit_v0" in caplog.text
        assert sorted(rollout_id for rollout_id, _ in agent.seen) == sorted(ids)
        finished = [call(server.poll_completed_rollout(rollout_id, timeout=30)) for rollout_id in ids]
        assert all(r is not None and r.final_reward == 0.75 for r in finished)
    finally:
        call(server.stop())
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
