"""A 0.3-style store that overrides only some `LightningStore` methods, on `LightningStore03`."""

from __future__ import annotations

from typing import Any

import pytest
from agl_legacy.store import LightningStore03

import agl_core as agl


class RolloutsOnly(LightningStore03):
    """0.3 user code: a store that keeps rollouts in a dict and implements nothing else."""

    def __init__(self) -> None:
        super().__init__()
        self.rollouts: dict[str, agl.Rollout] = {}

    async def enqueue_rollout(self, input: Any, *args: Any, **kwargs: Any) -> agl.Rollout:
        rollout = agl.Rollout(rollout_id=f"ro-{len(self.rollouts)}", input=input, start_time=0.0)
        self.rollouts[rollout.rollout_id] = rollout
        return rollout

    async def get_rollout_by_id(self, rollout_id: str) -> agl.Rollout | None:
        return self.rollouts.get(rollout_id)


async def test_a_store_overriding_some_methods_is_built_and_answers_those() -> None:
    store = RolloutsOnly()
    rollout = await store.enqueue_rollout(input={"q": 1})
    assert await store.get_rollout_by_id(rollout.rollout_id) == rollout
    with pytest.raises(NotImplementedError, match=r"RolloutsOnly does not implement dequeue_rollout\(\)"):
        await store.dequeue_rollout()
    with pytest.raises(NotImplementedError, match="add_span"):
        await store.add_span(None)  # type: ignore[arg-type]


async def test_agls_server_serves_the_methods_it_overrides() -> None:
    server = agl.LightningStoreServer(RolloutsOnly(), "127.0.0.1", 0)
    await server.start()
    client = agl.LightningStoreClient(server.endpoint)
    try:
        rollout = await client.enqueue_rollout(input={"q": 2})
        fetched = await client.get_rollout_by_id(rollout.rollout_id)
        assert fetched is not None and fetched.input == {"q": 2}
    finally:
        await client.close()
        await server.stop()


def test_the_plain_agl_base_still_refuses_an_incomplete_store() -> None:
    class Incomplete(agl.LightningStore):
        async def get_rollout_by_id(self, rollout_id: str) -> agl.Rollout | None:
            return None

    with pytest.raises(TypeError, match="abstract"):
        Incomplete()  # type: ignore[abstract]


def test_every_agl_store_is_a_store_03_as_every_03_store_was_a_lightning_store() -> None:
    assert isinstance(agl.InMemoryLightningStore(), LightningStore03)
    assert issubclass(agl.InMemoryLightningStore, LightningStore03)
    assert not isinstance(agl.InMemoryLightningStore(), RolloutsOnly)
    assert isinstance(RolloutsOnly(), agl.LightningStore)
