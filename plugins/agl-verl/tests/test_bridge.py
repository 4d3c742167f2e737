"""The driver-thread bridge: rollouts run on the store's event loop, with the proxy as ``main_llm``."""

from __future__ import annotations

import asyncio
import time

from agl_core.llm_proxy import LLMProxy
from agl_core.store.memory import InMemoryLightningStore
from agl_verl import VerlConfig
from agl_verl.algorithm import RolloutBridge
from agl_verl.data import BatchCollector

from .traces import SYSTEM, Call, Script, call_spans


async def _serve(store: InMemoryLightningStore, expected: int, seen_resources: list[str | None]) -> None:
    """A runner stand-in: plays every rollout it can dequeue until ``expected`` are done (30 s at most)."""
    deadline = time.monotonic() + 30
    done = 0
    while done < expected:
        assert time.monotonic() < deadline, "the bridge never enqueued its rollouts"
        attempted = await store.dequeue_rollout(worker_id="w")
        if attempted is None:
            await asyncio.sleep(0.01)  # poll interval of the stand-in runner, not a synchronisation point
            continue
        seen_resources.append(attempted.resources_id)
        rid, aid = attempted.rollout_id, attempted.attempt.attempt_id
        reward = float(done % 2)
        await store.add_many_spans(call_spans(rid, aid, Script([Call([*SYSTEM, 10], [20, done, 2])], reward)))
        await store.update_attempt(rid, aid, status="succeeded")
        done += 1


async def test_rollouts_from_a_driver_thread_use_the_proxy_resource_and_return_samples() -> None:
    store = InMemoryLightningStore()
    config = VerlConfig(model_path="/models/tiny", rollout_n=2, train_batch_size=2, ppo_mini_batch_size=2)
    proxy = LLMProxy(store=store)
    await proxy.start()
    endpoint = proxy.endpoint
    try:
        bridge = RolloutBridge(
            BatchCollector(store, config), asyncio.get_running_loop(), proxy, "/models/tiny", 30.0
        )
        bridge.point_proxy(["10.0.0.1:8000", "10.0.0.2:8000"])
        assert proxy.model_names() == ["/models/tiny"]
        seen: list[str | None] = []
        runner = asyncio.create_task(_serve(store, 4, seen))
        batch = await asyncio.to_thread(
            bridge.rollouts, [{"q": 1}, {"q": 2}], mode="train", n=2, temperature=0.7
        )
        await runner
    finally:
        await proxy.stop()
    assert len(batch.samples) == 4 and batch.metrics["agl/n_succeeded"] == 4
    assert len(set(seen)) == 1 and seen[0] is not None
    update = await store.get_resources_by_id(seen[0])
    assert update is not None
    llm = update.resources["main_llm"]
    assert llm.model == "/models/tiny" and llm.sampling_parameters == {"temperature": 0.7}
    assert llm.endpoint == endpoint
