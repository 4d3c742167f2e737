"""A runner runs a sync agent on one thread of its own for its whole life (thread-bound state survives)."""

from __future__ import annotations

import threading

from agl_core.emitter import emit_reward
from agl_core.litagent import rollout
from agl_core.store.memory import InMemoryLightningStore
from agl_core.types import LLM, NamedResources

from ._helpers import reward_values, running

RESOURCES: NamedResources = {"llm": LLM(endpoint="http://model/v1", model="m")}


async def test_consecutive_sync_rollouts_share_one_thread_and_its_state(
    store: InMemoryLightningStore,
) -> None:
    threads: list[int] = []
    configured = threading.local()  # like dspy.configure(): only the configuring thread may change it

    @rollout
    def agent(task: str) -> None:
        if not hasattr(configured, "owner"):
            configured.owner = threading.get_ident()
        if configured.owner != threading.get_ident():
            raise RuntimeError("can only be changed by the thread that initially configured it")
        threads.append(threading.get_ident())
        emit_reward(1.0)  # the rollout's tracing context reaches the agent's thread

    with running(agent, store) as runner:
        results = [await runner.step(f"t{i}", resources=RESOURCES) for i in range(6)]
        loop_thread = threading.get_ident()
    assert [r.status for r in results] == ["succeeded"] * 6
    assert len(set(threads)) == 1 and threads[0] != loop_thread
    for result in results:
        assert reward_values(list(await store.query_spans(result.rollout_id))) == [1.0]


async def test_teardown_releases_the_agent_thread(store: InMemoryLightningStore) -> None:
    @rollout
    def agent(task: str) -> None:
        return None

    before = {t.ident for t in threading.enumerate()}
    with running(agent, store) as runner:
        await runner.step("t", resources=RESOURCES)
        started = [
            t for t in threading.enumerate() if t.ident not in before and t.name.startswith("agl-sync")
        ]
        assert len(started) == 1
    started[0].join(timeout=5)
    assert not started[0].is_alive()
