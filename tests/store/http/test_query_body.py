"""The client's kept span-search bodies: the very bytes the encoder gives, per exact query."""

from __future__ import annotations

import pydantic_core
import pytest

from agl_core.store.http.query_body import SpanQueryBodies
from agl_core.types.queries import SpanQuery


def _counting() -> tuple[list[SpanQuery], SpanQueryBodies]:
    encoded: list[SpanQuery] = []

    def encode(query: SpanQuery) -> bytes:
        encoded.append(query)
        return pydantic_core.to_json(query)

    return encoded, SpanQueryBodies(encode, max_entries=2)


def test_a_repeated_query_reuses_its_body_and_others_get_their_own() -> None:
    encoded, bodies = _counting()
    query = SpanQuery(rollout_id="ro-1")
    assert bodies.body(query) == pydantic_core.to_json(query)
    assert bodies.body(SpanQuery(rollout_id="ro-1")) == pydantic_core.to_json(query)
    assert len(encoded) == 1
    other = SpanQuery(rollout_id="ro-1", limit=5)
    assert bodies.body(other) == pydantic_core.to_json(other) and len(encoded) == 2


def test_equal_values_of_other_types_are_encoded_as_themselves() -> None:
    encoded, bodies = _counting()
    for limit in (1, 1.0, True):  # equal in Python, three different JSON bodies
        query = SpanQuery(rollout_id="ro-1", limit=limit)  # type: ignore[arg-type]
        assert bodies.body(query) == pydantic_core.to_json(query)
    assert len(encoded) == 3


def test_unhashable_values_are_encoded_every_time_and_the_bodies_are_bounded() -> None:
    encoded, bodies = _counting()
    odd = SpanQuery(rollout_id=["ro-1"])  # type: ignore[arg-type]
    assert bodies.body(odd) == bodies.body(odd) == pydantic_core.to_json(odd)
    assert len(encoded) == 2 and len(bodies) == 0
    for index in range(5):
        bodies.body(SpanQuery(rollout_id=f"ro-{index}"))
    assert len(bodies) == 2
    with pytest.raises(ValueError, match="max_entries"):
        SpanQueryBodies(pydantic_core.to_json, max_entries=0)
