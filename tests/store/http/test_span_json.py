"""The server's span-page encoder: the same bytes as pydantic, re-encoding whatever changed."""

from __future__ import annotations

import asyncio

import pydantic
import pydantic_core
import pytest

from agl_core.store.http import BackgroundServer, LightningStoreClient
from agl_core.store.http.etags import body_etag
from agl_core.store.http.span_json import SpanJsonCache
from agl_core.store.memory import InMemoryLightningStore
from agl_core.types import PaginatedResult, Span, TraceStatus


def _span(seq: int) -> Span:
    return Span.from_attributes(
        attributes={"gen_ai.system": "openai", "tokens": [1, 2, 3], "ratio": 0.5, "ok": True},
        rollout_id="ro-1",
        attempt_id="at-1",
        sequence_id=seq,
        span_id=f"{seq:016x}",
        name="chat",
        start_time=1.5,
        end_time=2.0,
    )


def _page(spans: list[Span], total: int | None = None) -> PaginatedResult[Span]:
    return PaginatedResult[Span](
        items=spans, limit=-1, offset=0, total=len(spans) if total is None else total
    )


def test_page_json_is_pydantics_json_on_first_and_later_reads() -> None:
    cache = SpanJsonCache()
    page = _page([_span(1), _span(2), _span(3)], total=7)
    expected = pydantic_core.to_json(page)
    assert cache.page_answer(page)[0] == expected
    assert len(cache) == 3
    assert cache.page_answer(page)[0] == expected  # from the kept bytes
    assert cache.page_answer(_page([]))[0] == pydantic_core.to_json(_page([]))


def test_a_reassigned_field_is_encoded_again() -> None:
    cache = SpanJsonCache()
    span = _span(1)
    cache.page_answer(_page([span]))
    span.name = "renamed"
    span.status = TraceStatus(status_code="ERROR", description="boom")
    assert cache.page_answer(_page([span]))[0] == pydantic_core.to_json(_page([span]))
    assert b'"renamed"' in cache.span_json(span)


def test_extra_fields_and_subclasses_are_encoded_afresh() -> None:
    class MySpan(Span):
        pass

    cache = SpanJsonCache()
    with_extra = Span.model_validate({**_span(1).model_dump(), "custom": "x"})
    sub = MySpan.model_validate(_span(2).model_dump())
    page = _page([with_extra, sub])
    assert cache.page_answer(page)[0] == pydantic_core.to_json(page)
    assert len(cache) == 0
    with_extra.custom = "y"  # type: ignore[attr-defined]
    assert b'"custom":"y"' in (cache.page_answer(_page([with_extra]))[0] or b"")


def test_entries_are_bounded_and_zero_keeps_none() -> None:
    cache = SpanJsonCache(max_entries=2)
    spans = [_span(i) for i in range(1, 5)]
    page = _page(spans)
    assert cache.page_answer(page)[0] == pydantic_core.to_json(page)
    assert len(cache) == 2
    off = SpanJsonCache(max_entries=0)
    assert off.page_answer(page)[0] == pydantic_core.to_json(page)
    assert len(off) == 0
    with pytest.raises(ValueError, match="max_entries"):
        SpanJsonCache(max_entries=-1)


def test_query_spans_over_http_returns_equal_spans_on_repeated_reads() -> None:
    async def scenario(endpoint: str) -> None:
        client = LightningStoreClient(endpoint)
        try:
            started = await client.start_rollout({"task": 1})
            spans = [
                _span(i).model_copy(
                    update={"rollout_id": started.rollout_id, "attempt_id": started.attempt.attempt_id}
                )
                for i in range(1, 6)
            ]
            await client.add_many_spans(spans)
            first = await client.query_spans(started.rollout_id)
            again = await client.query_spans(started.rollout_id)
            page = await client.query_spans(started.rollout_id, limit=2, offset=1)
        finally:
            await client.close()
        assert list(first) == spans and list(again) == spans
        assert all(type(s) is Span for s in again)
        assert list(page) == spans[1:3] and (page.limit, page.offset, page.total) == (2, 1, 5)

    with BackgroundServer(InMemoryLightningStore) as server:
        asyncio.run(scenario(server.endpoint))


def test_page_etags_are_equal_exactly_when_the_answers_are() -> None:
    cache = SpanJsonCache()
    spans = [_span(1), _span(2), _span(3)]
    body, etag = cache.page_answer(_page(spans))
    assert cache.page_answer(_page(list(spans))) == (body, etag)  # kept bytes: the same ETag
    assert SpanJsonCache(max_entries=0).page_answer(_page(spans)) == (body, etag)  # encoded afresh
    assert cache.page_answer(_page(spans), if_none_match=etag) == (None, etag)  # 304: no body built
    assert cache.page_answer(_page(spans), if_none_match='"other"') == (body, etag)
    others = {
        cache.page_answer(_page(spans, total=4))[1],  # same spans, another total
        cache.page_answer(_page(spans[:2]))[1],
        cache.page_answer(_page(spans[::-1]))[1],
        cache.page_answer(PaginatedResult[Span](items=spans, limit=3, offset=0, total=3))[1],
    }
    spans[1].name = "renamed"
    others.add(cache.page_answer(_page(spans))[1])
    assert etag not in others and len(others) == 5


def test_an_unusual_page_gets_the_etag_of_its_bytes() -> None:
    class Page(PaginatedResult[Span]):
        note: str = "x"

    page = Page(items=[_span(1)], limit=-1, offset=0, total=1)
    body, etag = SpanJsonCache().page_answer(page)
    assert body == pydantic_core.to_json(page) and b'"note":"x"' in body
    assert etag == body_etag(body)
    assert SpanJsonCache().page_answer(page, if_none_match=f"W/{etag}") == (None, etag)


def test_a_kept_page_etag_is_used_only_while_every_span_is_unchanged() -> None:
    cache = SpanJsonCache()
    spans = [_span(1), _span(2), _span(3)]
    etag = cache.page_answer(_page(spans))[1]
    assert cache.page_spans == 0  # unconditional reads keep no page
    assert cache.page_answer(_page(spans), if_none_match=etag) == (None, etag)
    assert cache.page_spans == 3
    assert cache.page_answer(_page(list(spans)), if_none_match=etag) == (None, etag)  # the kept ETag
    equal = [spans[0], spans[1].model_copy(), spans[2]]  # an equal new span: the same answer
    assert cache.page_answer(_page(equal), if_none_match=etag) == (None, etag)

    def changed(page: PaginatedResult[Span], keep_first: bool = True) -> None:
        if keep_first:  # the unchanged page's ETag is kept again before each change
            assert cache.page_answer(_page(spans), if_none_match=etag) == (None, etag)
        new_body, new_etag = cache.page_answer(page, if_none_match=etag)
        assert new_body == pydantic_core.to_json(page) and new_etag != etag

    changed(_page([*spans, _span(4)]))  # a span added
    changed(_page(spans, total=9))  # only the total differs
    changed(_page([spans[0], _span(7), spans[2]]))  # another span in the middle
    with_extra = Span.model_validate({**spans[1].model_dump(), "custom": "x"})
    changed(_page([spans[0], with_extra, spans[2]]))

    class Shouting(Span):  # the same fields and values, another JSON
        @pydantic.field_serializer("name")
        def _shout(self, name: str) -> str:
            return name.upper()

    shouting = _page([spans[0], Shouting.model_validate(spans[1].model_dump()), spans[2]])
    assert cache.page_answer(_page(spans), if_none_match=etag) == (None, etag)
    answer = cache.page_answer(shouting, if_none_match=etag)
    assert answer == SpanJsonCache().page_answer(shouting) and b'"CHAT"' in (answer[0] or b"")
    assert cache.page_answer(_page(spans), if_none_match=etag) == (None, etag)
    spans[2].end_time = 3.0  # reassigned in place: same objects, same dicts, new value
    changed(_page(spans), keep_first=False)
    spans[2].end_time = 2.0
    assert cache.page_answer(_page(spans), if_none_match=etag) == (None, etag)
    spans[0].attributes = {"other": 1}
    changed(_page(spans), keep_first=False)


def test_kept_pages_are_bounded_by_spans_and_zero_keeps_none() -> None:
    cache = SpanJsonCache(max_page_spans=5)

    def revalidate(page: PaginatedResult[Span]) -> None:
        etag = cache.page_answer(page)[1]
        assert cache.page_answer(page, if_none_match='"other"')[0] is not None
        assert cache.page_spans == kept  # a conditional read that is answered in full keeps nothing
        assert cache.page_answer(page, if_none_match=etag) == (None, etag)

    kept = 0
    pages = [_page([_span(i), _span(i + 10)]) for i in range(3)]
    for page in pages:
        revalidate(page)
        kept = min(kept + 2, 4)
    assert cache.page_spans == 4  # the oldest page of two spans was dropped
    revalidate(_page([_span(i) for i in range(6)]))  # too big to keep
    assert cache.page_spans == 4
    off = SpanJsonCache(max_page_spans=0)
    etag = off.page_answer(pages[0])[1]
    assert off.page_answer(pages[0], if_none_match=etag) == (None, etag) and off.page_spans == 0
    with pytest.raises(ValueError, match="max_page_spans"):
        SpanJsonCache(max_page_spans=-1)


def test_a_polling_client_sees_every_change_to_the_served_spans() -> None:
    store = InMemoryLightningStore()

    async def scenario(endpoint: str) -> None:
        client = LightningStoreClient(endpoint)
        try:
            started = await client.start_rollout({"task": 1})
            ids = {"rollout_id": started.rollout_id, "attempt_id": started.attempt.attempt_id}
            spans = [_span(i).model_copy(update=ids) for i in range(1, 4)]
            await client.add_many_spans(spans)
            for _ in range(3):  # revalidated: the server keeps the page's ETag
                assert list(await client.query_spans(started.rollout_id)) == spans
            added = _span(4).model_copy(update=ids)
            await client.add_span(added)
            assert list(await client.query_spans(started.rollout_id)) == [*spans, added]
            assert list(await client.query_spans(started.rollout_id)) == [*spans, added]
            served = (await store.query_spans(started.rollout_id)).items[1]
            served.name = "renamed on the server"  # a stored span's value changed in place
            again = await client.query_spans(started.rollout_id)
            assert [span.name for span in again] == ["chat", "renamed on the server", "chat", "chat"]
        finally:
            await client.close()

    with BackgroundServer(lambda: store) as server:
        asyncio.run(scenario(server.endpoint))
