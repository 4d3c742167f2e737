"""0.3's deprecated v0.1 stack: ``AgentLightningServer`` queues tasks, ``AgentLightningClient`` runs them,
``DevTaskLoader`` stands in for the client; each warns as deprecated and works."""

from __future__ import annotations

import asyncio

import pytest

import agl_core as agl
from agl_core.types.legacy import RolloutLegacy


def _run_one_task(client: agl.AgentLightningClient) -> str:
    """The v0.1 worker loop of a 0.3 script (sync API): take a task, read its resources, report."""
    task = client.poll_next_task()
    assert task is not None and task.resources_id is not None
    resources = client.get_resources_by_id(task.resources_id)
    assert resources is not None
    prompt = resources.resources["prompt"]
    answer = prompt.format(**task.input)  # type: ignore[union-attr]
    client.post_rollout(RolloutLegacy(rollout_id=task.rollout_id, task=task, final_reward=1.0, logs=[answer]))
    return answer


async def test_server_and_client_run_a_task_over_http() -> None:
    with pytest.warns(DeprecationWarning, match="LightningStoreServer"):
        server = agl.AgentLightningServer(host="127.0.0.1", port=0, task_timeout_seconds=300)
    await server.start()
    try:
        resources_id = await server.update_resources(
            {"prompt": agl.PromptTemplate(template="Q: {q}", engine="f-string")}
        )
        rollout_id = await server.queue_task({"q": "2+2"}, mode="train", resources_id=resources_id)
        assert rollout_id.startswith("rollout-")
        with pytest.warns(DeprecationWarning, match="LightningStoreClient"):
            client = agl.AgentLightningClient(server.endpoint, poll_interval=0.05, timeout=10)
        answer = await asyncio.to_thread(_run_one_task, client)
        rollout = await server.poll_completed_rollout(rollout_id, timeout=30)
        assert rollout is not None and rollout.final_reward == 1.0 and rollout.logs == [answer] == ["Q: 2+2"]
        assert rollout.task is not None and rollout.task.num_claims == 1 and rollout.task.mode == "train"
        latest = await client.get_latest_resources_async()
        assert latest is not None and latest.resources_id == resources_id
        assert await client.get_resources_by_id_async("res-unknown") is None
        assert await server.retrieve_completed_rollouts() == []  # poll_completed_rollout took it out
    finally:
        await server.stop()


async def test_a_claimed_task_is_handed_out_again_after_the_timeout() -> None:
    with pytest.warns(DeprecationWarning):
        server = agl.AgentLightningServer(port=0, task_timeout_seconds=0)
        client = agl.AgentLightningClient(server.endpoint, poll_interval=0.05)
    await server.start()
    try:
        client.endpoint = server.endpoint
        rollout_id = await server.queue_task("x")
        first = await client.poll_next_task_async()
        second = await client.poll_next_task_async()
        assert first is not None and second is not None
        assert first.rollout_id == second.rollout_id == rollout_id and second.num_claims == 2
    finally:
        await server.stop()


def test_dev_task_loader_serves_tasks_in_order_and_keeps_rollouts() -> None:
    with pytest.warns(DeprecationWarning, match="Trainer.dev"):
        loader = agl.DevTaskLoader(
            [{"q": "a"}, {"q": "b"}], {"prompt": agl.PromptTemplate(template="{q}", engine="f-string")}
        )
    tasks = [loader.poll_next_task() for _ in range(3)]
    assert [t.rollout_id for t in tasks if t] == ["local_task_001", "local_task_002", "local_task_001"]
    assert loader.get_latest_resources() is loader.get_resources_by_id("local")
    with pytest.raises(ValueError, match="Only 'local' is available"):
        loader.get_resources_by_id("other")
    loader.post_rollout(RolloutLegacy(rollout_id="local_task_001", final_reward=0.5))
    assert [r.final_reward for r in loader.rollouts] == [0.5]
    with pytest.raises(ValueError, match="at least one task"), pytest.warns(DeprecationWarning):
        agl.DevTaskLoader([], {})
