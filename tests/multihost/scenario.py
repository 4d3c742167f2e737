"""Helpers shared by the multi-host scenarios."""

from __future__ import annotations

import itertools
import time
from typing import Any

from agl_core.types import EnqueueRolloutRequest, PromptTemplate, RolloutConfig
from tests.multihost.conftest import Cluster

RESOURCES = {"prompt_template": PromptTemplate(template="{x}", engine="f-string")}


def poll(cluster: Cluster, fn: Any, timeout: float, what: str) -> Any:
    """Call ``await fn(client)`` until it returns something truthy (bounded)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cluster.call(fn)
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def enqueue(cluster: Cluster, config: RolloutConfig, tasks: list[dict[str, Any]]) -> list[str]:
    """Enqueue one rollout per task; returns the acknowledged rollout ids."""
    requests = [EnqueueRolloutRequest(input=t, config=config) for t in tasks]
    return [r.rollout_id for r in cluster.call(lambda c: c.enqueue_many_rollouts(requests))]


def finished(ids: list[str]) -> Any:
    """A check that every rollout of ``ids`` is finished."""

    async def check(client: Any) -> bool:
        rollouts = await client.query_rollouts(rollout_id_in=ids)
        return all(r.status in ("succeeded", "failed", "cancelled") for r in rollouts)

    return check


def overlapping_attempts(attempts: list[Any]) -> int:
    """Pairs of attempts of one rollout that were active at the same time (a double claim)."""
    spans = sorted((a.start_time, a.end_time or float("inf")) for a in attempts)
    return sum(1 for (_, end), (start, _) in itertools.pairwise(spans) if start < end)
