"""The store's two levels: public methods that check once, a narrow backend interface below.

A store written for Agent Lightning 0.3 overrides the public methods and never heard of the backend
methods; it must still instantiate, answer, and be served over HTTP through its own methods. A new
backend implements the narrow interface only and is told by name what it forgot.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Literal

import pytest

from agl_core.store import (
    UNSET,
    InMemoryLightningStore,
    InvalidFilterError,
    InvalidRequestError,
    InvalidStatusError,
    LightningStore,
    LightningStoreClient,
    Unset,
)
from agl_core.store.http import BackgroundServer
from agl_core.types import Attempt, AttemptedRollout, PaginatedResult, Rollout, Span, Worker
from agl_core.types.queries import AttemptUpdate, RolloutQuery, SpanQuery, WorkerQuery

BACKEND_METHODS = {
    "_query_rollouts",
    "_query_spans",
    "_query_workers",
    "_apply_rollout_update",
    "_apply_attempt_update",
}


class LegacyStore(LightningStore):
    """A 0.3-style custom store: every contract method overridden with 0.3's signature, by hand.

    It keeps its data in an in-memory store and records which public methods were called.
    """

    def __init__(self) -> None:
        super().__init__()
        self.inner = InMemoryLightningStore()
        self.calls: list[str] = []

    async def start_rollout(
        self,
        input: Any,
        mode: Any = None,
        resources_id: Any = None,
        config: Any = None,
        metadata: Any = None,
        worker_id: Any = None,
    ) -> AttemptedRollout:
        return await self.inner.start_rollout(input, mode, resources_id, config, metadata, worker_id)

    async def enqueue_rollout(
        self, input: Any, mode: Any = None, resources_id: Any = None, config: Any = None, metadata: Any = None
    ) -> Rollout:
        return await self.inner.enqueue_rollout(input, mode, resources_id, config, metadata)

    async def dequeue_rollout(self, worker_id: str | None = None) -> AttemptedRollout | None:
        return await self.inner.dequeue_rollout(worker_id)

    async def start_attempt(self, rollout_id: str, worker_id: str | None = None) -> AttemptedRollout:
        return await self.inner.start_attempt(rollout_id, worker_id)

    async def query_rollouts(
        self,
        *,
        status_in: Sequence[str] | None = None,
        rollout_id_in: Sequence[str] | None = None,
        rollout_id_contains: str | None = None,
        filter_logic: Literal["and", "or"] = "and",
        sort_by: str | None = None,
        sort_order: Literal["asc", "desc"] = "asc",
        limit: int = -1,
        offset: int = 0,
        status: Sequence[str] | None = None,
        rollout_ids: Sequence[str] | None = None,
    ) -> PaginatedResult[Rollout | AttemptedRollout]:
        self.calls.append("query_rollouts")
        return await self.inner.query_rollouts(
            status_in=status_in,  # type: ignore[arg-type]
            rollout_id_in=rollout_id_in,
            rollout_id_contains=rollout_id_contains,
            filter_logic=filter_logic,
            sort_by=sort_by,
            sort_order=sort_order,
            limit=limit,
            offset=offset,
        )

    async def query_attempts(
        self,
        rollout_id: str,
        *,
        sort_by: str | None = "sequence_id",
        sort_order: Literal["asc", "desc"] = "asc",
        limit: int = -1,
        offset: int = 0,
    ) -> PaginatedResult[Attempt]:
        return await self.inner.query_attempts(
            rollout_id, sort_by=sort_by, sort_order=sort_order, limit=limit, offset=offset
        )

    async def get_rollout_by_id(self, rollout_id: str) -> Rollout | AttemptedRollout | None:
        return await self.inner.get_rollout_by_id(rollout_id)

    async def get_latest_attempt(self, rollout_id: str) -> Attempt | None:
        return await self.inner.get_latest_attempt(rollout_id)

    async def update_rollout(
        self,
        rollout_id: str,
        input: Any = UNSET,
        mode: Any = UNSET,
        resources_id: Any = UNSET,
        status: Any = UNSET,
        config: Any = UNSET,
        metadata: Any = UNSET,
    ) -> Rollout:
        self.calls.append("update_rollout")
        return await self.inner.update_rollout(
            rollout_id, input, mode, resources_id, status, config, metadata
        )

    async def update_attempt(
        self,
        rollout_id: str,
        attempt_id: str,
        status: Any = UNSET,
        worker_id: Any = UNSET,
        last_heartbeat_time: Any = UNSET,
        metadata: Any = UNSET,
    ) -> Attempt:
        self.calls.append("update_attempt")
        return await self.inner.update_attempt(
            rollout_id, attempt_id, status, worker_id, last_heartbeat_time, metadata
        )

    async def wait_for_rollouts(
        self, *, rollout_ids: list[str], timeout: float | None = None
    ) -> list[Rollout]:
        return await self.inner.wait_for_rollouts(rollout_ids=rollout_ids, timeout=timeout)

    async def add_span(self, span: Span) -> Span | None:
        return await self.inner.add_span(span)

    async def get_next_span_sequence_id(self, rollout_id: str, attempt_id: str) -> int:
        return await self.inner.get_next_span_sequence_id(rollout_id, attempt_id)

    async def query_spans(self, rollout_id: str, attempt_id: str | None = None, **filters: Any) -> Any:
        self.calls.append("query_spans")
        return await self.inner.query_spans(rollout_id, attempt_id, **filters)

    async def add_resources(self, resources: Any) -> Any:
        return await self.inner.add_resources(resources)

    async def update_resources(self, resources_id: str, resources: Any) -> Any:
        return await self.inner.update_resources(resources_id, resources)

    async def get_resources_by_id(self, resources_id: str) -> Any:
        return await self.inner.get_resources_by_id(resources_id)

    async def get_latest_resources(self) -> Any:
        return await self.inner.get_latest_resources()

    async def query_resources(self, **kwargs: Any) -> Any:
        return await self.inner.query_resources(**kwargs)

    async def query_workers(self, **kwargs: Any) -> PaginatedResult[Worker]:
        self.calls.append("query_workers")
        return await self.inner.query_workers(**kwargs)

    async def get_worker_by_id(self, worker_id: str) -> Worker | None:
        return await self.inner.get_worker_by_id(worker_id)

    async def update_worker(self, worker_id: str, heartbeat_stats: dict[str, Any] | Unset = UNSET) -> Worker:
        return await self.inner.update_worker(worker_id, heartbeat_stats)


def test_the_contract_asks_backends_for_the_narrow_methods_only() -> None:
    abstract = LightningStore.__abstractmethods__
    assert abstract >= BACKEND_METHODS
    assert (
        not {"query_rollouts", "query_spans", "query_workers", "update_rollout", "update_attempt"} & abstract
    )


def test_a_backend_missing_a_narrow_method_is_told_which() -> None:
    attributes = {
        name: getattr(LegacyStore, name)
        for name in LightningStore.__abstractmethods__
        if not name.startswith("_")
    }
    incomplete = type("Incomplete", (LightningStore,), attributes)
    with pytest.raises(TypeError, match="_query_spans"):
        incomplete()


async def test_a_03_style_store_works_through_its_own_methods() -> None:
    store = LegacyStore()
    started = await store.start_rollout({"q": 1}, worker_id="w1")
    await store.add_span(
        Span.from_attributes(
            attributes={"k": 1},
            rollout_id=started.rollout_id,
            attempt_id=started.attempt.attempt_id,
            name="llm",
        )
    )
    spans = await store.query_spans(started.rollout_id)
    assert [s.name for s in spans] == ["llm"]
    # The typed entry the REST handlers use goes through the store's own public methods.
    via_request = await store._execute(SpanQuery(started.rollout_id, name_contains="ll"))
    assert [s.span_id for s in via_request] == [s.span_id for s in spans]
    await store._execute(AttemptUpdate(started.rollout_id, "latest", status="succeeded"))
    rollouts = await store._execute(RolloutQuery(status_in=["succeeded"]))
    assert [r.rollout_id for r in rollouts] == [started.rollout_id]
    workers = await store._execute(WorkerQuery(status_in=["idle"]))
    assert [w.worker_id for w in workers] == ["w1"]
    assert store.calls == ["query_spans", "query_spans", "update_attempt", "query_rollouts", "query_workers"]
    # Its statistics (a default of the contract) count through the public queries too.
    assert (await store.statistics())["total_spans"] == 1


def test_a_03_style_store_is_served_over_http_through_its_own_methods() -> None:
    store = LegacyStore()

    async def use(endpoint: str) -> tuple[list[str], str]:
        client = LightningStoreClient(endpoint, timeout=30.0)
        try:
            started = await client.start_rollout("x")
            await client.update_attempt(started.rollout_id, started.attempt.attempt_id, status="failed")
            await client.update_rollout(started.rollout_id, metadata={"seen": True})
            found = await client.query_rollouts(status_in=["failed"], rollout_id_contains="ro-")
            spans = await client.query_spans(started.rollout_id, "latest")
            assert len(spans) == 0
            return [r.rollout_id for r in found], started.rollout_id
        finally:
            await client.close()

    with BackgroundServer(store) as server:
        found, rollout_id = asyncio.run(use(server.endpoint))
    assert found == [rollout_id]
    assert store.calls == ["update_attempt", "update_rollout", "query_rollouts", "query_spans"]


async def test_a_subclass_override_of_a_bundled_store_sees_typed_requests() -> None:
    class Counting(InMemoryLightningStore):
        seen = 0

        async def query_spans(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
            type(self).seen += 1
            return await super().query_spans(*args, **kwargs)

    store = Counting()
    started = await store.start_rollout("x")
    assert len(await store._execute(SpanQuery(started.rollout_id, "latest"))) == 0
    assert Counting.seen == 1


@pytest.mark.parametrize(
    ("request_", "error", "match"),
    [
        (SpanQuery("ro-x", limit=-2), InvalidRequestError, "limit must be >= 0"),
        (SpanQuery("ro-x", filter_logic="xor"), InvalidFilterError, "filter_logic"),
        (RolloutQuery(status_in=["nope"]), InvalidStatusError, "nope"),
        (WorkerQuery(sort_by="no_such_field"), InvalidFilterError, "no_such_field"),
        (AttemptUpdate("ro-x", "latest", status="bogus"), InvalidStatusError, "bogus"),
    ],
)
async def test_typed_requests_get_the_one_check(request_: Any, error: type[Exception], match: str) -> None:
    store = InMemoryLightningStore()
    with pytest.raises(error, match=match):
        await store._execute(request_)
