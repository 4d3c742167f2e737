"""The server's memo of parsed span search bodies (`StoreApi.span_query`)."""

from __future__ import annotations

import pytest

from agl_core.store import open_store
from agl_core.store.errors import InvalidRequestError
from agl_core.store.http import handlers
from agl_core.store.http.errors import RequestValidationError
from agl_core.store.http.handlers import StoreApi, parse_json
from agl_core.types.queries import SpanQuery


def _api() -> StoreApi:
    return StoreApi(open_store("memory:"), max_body_bytes=1 << 20, max_wait_seconds=1.0)


def test_a_repeated_body_gives_an_equal_new_query_each_time() -> None:
    api = _api()
    raw = b'{"rollout_id":"ro-1","attempt_id":"latest","name_contains":"llm","limit":5,"offset":2}'
    first, second = api.span_query(raw), api.span_query(raw)
    assert first == second == parse_json(SpanQuery, raw)
    assert first is not second  # a caller changing its query cannot change the next one
    first.limit = 99
    assert api.span_query(raw).limit == 5


def test_bad_bodies_raise_every_time_and_are_not_kept() -> None:
    api = _api()
    for _ in range(2):
        with pytest.raises(InvalidRequestError, match="limit"):
            api.span_query(b'{"rollout_id":"ro-1","limit":"many"}')
        with pytest.raises(RequestValidationError, match="needs a JSON body"):
            api.span_query(b"  ")
    assert api._span_queries == {}


def test_the_memo_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(handlers, "SPAN_QUERY_MEMO_ENTRIES", 3)
    api = _api()
    bodies = [b'{"rollout_id":"ro-%d"}' % n for n in range(5)]
    for raw in bodies:
        assert api.span_query(raw).rollout_id == raw[15:-2].decode()
    assert list(api._span_queries) == bodies[2:]  # the oldest went first
