"""The in-memory store keeps spans compactly and gives back spans equal to those it was given.

`InMemoryLightningStore` stores its own compact copy of each span (`agl_core.store._memory_spans`)
and returns it on reads: what comes back must equal what went in (fields, which fields were set, extra
attributes), the caller's span no longer changes the stored copy afterwards, and a returned span
cannot be given extra attributes (that would change every stored span).
"""

from __future__ import annotations

import copy
import pickle
from typing import Any

import pytest

from agl_core.store._memory_spans import SpanPacker, unpack
from agl_core.store.memory import InMemoryLightningStore
from agl_core.testing.store_conformance import make_span
from agl_core.types import Span


class TaggedSpan(Span):
    """A subclass of `Span` (the store keeps such spans as given)."""

    tag: str = "t"


def _same(a: Span, b: Span) -> bool:
    return (
        type(a) is type(b)
        and a == b
        and a.model_fields_set == b.model_fields_set
        and a.model_dump(mode="json") == b.model_dump(mode="json")
        and a.model_dump(mode="json", exclude_unset=True) == b.model_dump(mode="json", exclude_unset=True)
    )


def _variants(rollout_id: str, attempt_id: str) -> list[Span]:
    plain = make_span(rollout_id, attempt_id, 1, attributes={"k": 1, "nested.list": [1, 2]})
    with_extra = Span.model_validate(
        {**make_span(rollout_id, attempt_id, 2).model_dump(), "custom": {"x": 1}}
    )
    partial = Span.model_construct(
        **{k: v for k, v in make_span(rollout_id, attempt_id, 3).__dict__.items() if k != "parent"},
        parent=None,
    )
    partial.__pydantic_fields_set__.discard("parent")
    subclass = TaggedSpan.model_validate({**make_span(rollout_id, attempt_id, 4).model_dump(), "tag": "z"})
    return [plain, with_extra, partial, subclass]


def test_a_packed_span_unpacks_to_an_equal_span() -> None:
    packer = SpanPacker()
    for span in _variants("ro-1", "at-1"):
        back = unpack(packer.pack(span, "ro-1", "at-1"))
        assert _same(back, span), type(span).__name__
    assert unpack(packer.pack(make_span("ro-1", "at-1", 9), "ro-1", "at-1")) is not None


async def test_spans_come_back_equal_and_the_stored_copy_cannot_be_changed() -> None:
    store = InMemoryLightningStore()
    attempted = await store.start_rollout("x")
    rollout_id, attempt_id = attempted.rollout_id, attempted.attempt.attempt_id
    given = _variants(rollout_id, attempt_id)
    expected = [span.model_copy(deep=True) for span in given]
    for span in given:
        assert await store.add_span(span) is span
    got = list(await store.query_spans(rollout_id))
    assert len(got) == len(expected)
    for back, original in zip(got, expected, strict=True):
        assert _same(back, original), type(original).__name__
    # Reassigning a field of the caller's span, or changing its extras, leaves the stored copy as it was
    # (nested values such as the attributes dict are shared: callers must not modify them).
    given[0].name = "renamed by the caller"
    given[1].__pydantic_extra__["custom"] = "changed"  # type: ignore[index]
    got[1].__pydantic_extra__["custom"] = "changed"  # type: ignore[index]
    again = list(await store.query_spans(rollout_id))
    assert again[0].name == expected[0].name
    assert again[1].__pydantic_extra__ == {"custom": {"x": 1}}


async def test_duplicates_are_found_per_attempt() -> None:
    store = InMemoryLightningStore()
    first = await store.start_rollout("x")
    second = await store.start_attempt(first.rollout_id)
    rollout_id = first.rollout_id
    span_id = "a" * 16
    assert await store.add_span(make_span(rollout_id, first.attempt.attempt_id, 1, span_id=span_id))
    assert await store.add_span(make_span(rollout_id, first.attempt.attempt_id, 2, span_id=span_id)) is None
    assert await store.add_span(make_span(rollout_id, second.attempt.attempt_id, 3, span_id=span_id))
    found: Any = await store.query_spans(rollout_id, second.attempt.attempt_id)
    assert [s.sequence_id for s in found] == [3]
    assert [s.sequence_id for s in await store.query_spans(rollout_id)] == [1, 3]


async def test_a_returned_span_refuses_new_attributes_and_its_copies_accept_them() -> None:
    store = InMemoryLightningStore()
    attempted = await store.start_rollout("x")
    rollout_id, attempt_id = attempted.rollout_id, attempted.attempt.attempt_id
    await store.add_many_spans([make_span(rollout_id, attempt_id, seq) for seq in (1, 2)])
    first, second = (await store.query_spans(rollout_id)).items
    with pytest.raises(TypeError, match="read-only"):
        first.custom = 1  # type: ignore[attr-defined]
    assert second.model_extra == {} and "custom" not in first.model_fields_set
    for changed in (
        first.model_copy(),
        first.model_copy(deep=True),
        copy.copy(first),
        pickle.loads(pickle.dumps(first)),
    ):
        changed.custom = 1  # type: ignore[attr-defined]
        assert changed.model_extra == {"custom": 1}
    assert first.model_copy(update={"custom": 2}).model_extra == {"custom": 2}
    assert first.model_extra == {} and first.model_fields_set == second.model_fields_set


async def test_duplicates_are_found_in_an_attempt_with_many_spans() -> None:
    store = InMemoryLightningStore()
    attempted = await store.start_rollout("x")
    rollout_id, attempt_id = attempted.rollout_id, attempted.attempt.attempt_id
    spans = [make_span(rollout_id, attempt_id, seq, span_id=f"{seq:016x}") for seq in range(1, 101)]
    assert len(await store.add_many_spans(spans)) == 100
    again = [make_span(rollout_id, attempt_id, 200 + seq, span_id=f"{seq:016x}") for seq in (1, 40, 100)]
    assert await store.add_many_spans(again) == []
    assert await store.add_span(again[0]) is None
    assert (await store.query_spans(rollout_id)).total == 100


async def test_spans_are_built_on_their_first_read_and_kept() -> None:
    """The store keeps rows until a read builds spans; later reads return those same span objects."""
    store = InMemoryLightningStore()
    attempted = await store.start_rollout("x")
    rollout_id, attempt_id = attempted.rollout_id, attempted.attempt.attempt_id
    given = [make_span(rollout_id, attempt_id, seq) for seq in (1, 2)]
    await store.add_many_spans(given)
    first = (await store.query_spans(rollout_id)).items
    await store.add_span(make_span(rollout_id, attempt_id, 3))
    second = (await store.query_spans(rollout_id)).items
    assert [s.sequence_id for s in second] == [1, 2, 3]
    assert second[0] is first[0] and second[1] is first[1]  # built once, then kept
    assert all(back == span and back is not span for back, span in zip(first, given, strict=True))
    assert (await store.query_spans(rollout_id, attempt_id)).items[2] is second[2]
