"""A 0.3-style store that overrides the public query and update methods agl made final."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agl_legacy.store import LightningStore03

import agl_core as agl
from agl_core.store.http import BackgroundServer


class Recording(LightningStore03):
    """0.3 user code: forwards to an in-memory store and records the public methods it is called through."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = agl.InMemoryLightningStore()
        self.calls: list[str] = []

    async def start_rollout(self, input: Any, *args: Any, **kwargs: Any) -> agl.AttemptedRollout:
        return await self.inner.start_rollout(input, *args, **kwargs)

    async def query_rollouts(self, **kwargs: Any) -> Any:  # type: ignore[override]
        self.calls.append("query_rollouts")
        return await self.inner.query_rollouts(**kwargs)

    async def update_rollout(self, rollout_id: str, **changes: Any) -> Any:  # type: ignore[override]
        self.calls.append("update_rollout")
        return await self.inner.update_rollout(rollout_id, **changes)

    async def update_attempt(self, rollout_id: str, attempt_id: str, **changes: Any) -> Any:  # type: ignore[override]
        self.calls.append("update_attempt")
        return await self.inner.update_attempt(rollout_id, attempt_id, **changes)

    async def query_spans(self, rollout_id: str, attempt_id: Any = None, **filters: Any) -> Any:  # type: ignore[override]
        self.calls.append("query_spans")
        return await self.inner.query_spans(rollout_id, attempt_id, **filters)


def test_the_store_is_served_over_http_through_its_own_public_methods() -> None:
    store = Recording()

    async def use(endpoint: str) -> tuple[list[str], str]:
        client = agl.LightningStoreClient(endpoint, timeout=30.0)
        try:
            started = await client.start_rollout("x")
            await client.update_attempt(started.rollout_id, started.attempt.attempt_id, status="failed")
            await client.update_rollout(started.rollout_id, metadata={"seen": True})
            found = await client.query_rollouts(status_in=["failed"], rollout_id_contains="ro-")
            assert len(await client.query_spans(started.rollout_id, "latest")) == 0
            return [r.rollout_id for r in found], started.rollout_id
        finally:
            await client.close()

    with BackgroundServer(store) as server:
        found, rollout_id = asyncio.run(use(server.endpoint))
    assert found == [rollout_id]
    assert store.calls == ["update_attempt", "update_rollout", "query_rollouts", "query_spans"]


async def test_a_final_method_it_does_not_override_names_itself() -> None:
    with pytest.raises(NotImplementedError, match=r"Recording does not implement query_workers\(\)"):
        await Recording().query_workers()
