"""The store's two levels: final public methods that check once, a narrow backend interface below.

A new backend implements the narrow interface only and is told by name what it forgot; a store that
wraps another (`DelegatingLightningStore`) hands the checked request to the wrapped store's backend
method, so a request is checked once however many stores it passes.
"""

from __future__ import annotations

from typing import Any

import pytest

from agl_core.store import (
    InMemoryLightningStore,
    InvalidFilterError,
    InvalidRequestError,
    InvalidStatusError,
    LightningStore,
)
from agl_core.store.base import BACKEND_METHODS
from agl_core.store.delegating import DelegatingLightningStore
from agl_core.types.queries import AttemptUpdate, RolloutQuery, SpanQuery, WorkerQuery


def test_the_contract_asks_backends_for_the_narrow_methods_only() -> None:
    abstract = LightningStore.__abstractmethods__
    assert abstract >= set(BACKEND_METHODS.values())
    assert not set(BACKEND_METHODS) & abstract


def test_a_backend_missing_a_narrow_method_is_told_which() -> None:
    attributes = {
        name: getattr(InMemoryLightningStore, name)
        for name in LightningStore.__abstractmethods__
        if name != "_query_spans"
    }
    incomplete = type("Incomplete", (LightningStore,), attributes)
    with pytest.raises(TypeError, match="_query_spans"):
        incomplete()


class _Wrapper(DelegatingLightningStore):
    def __init__(self, store: LightningStore) -> None:
        super().__init__()
        self.store = store


async def test_a_wrapping_store_checks_once_and_forwards_the_checked_request() -> None:
    class Counting(InMemoryLightningStore):
        seen: list[Any] = []

        async def _query_spans(self, query: Any, where: Any) -> Any:
            type(self).seen.append(query)
            return await super()._query_spans(query, where)

    inner = Counting()
    store = _Wrapper(_Wrapper(inner))
    started = await store.start_rollout("x")
    assert len(await store.query_spans(started.rollout_id, "latest")) == 0
    assert len(await store._execute(SpanQuery(started.rollout_id, name_contains="ll"))) == 0
    assert [q.attempt_id for q in Counting.seen] == ["latest", None]
    with pytest.raises(InvalidRequestError, match="limit must be >= 0"):
        await store.query_spans(started.rollout_id, limit=-2)
    assert len(Counting.seen) == 2


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
