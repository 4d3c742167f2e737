"""Shared helpers for tracer tests."""

from __future__ import annotations

from agl_core.store.memory import InMemoryLightningStore


async def new_attempt(store: InMemoryLightningStore) -> tuple[str, str]:
    """Create a rollout with its first attempt; return (rollout_id, attempt_id)."""
    attempted = await store.start_rollout(input={"task": "test"})
    return attempted.rollout_id, attempted.attempt.attempt_id
