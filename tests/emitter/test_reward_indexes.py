"""Reward attributes with absurd indexes are ignored quickly, never built into huge lists (issue 34)."""

from __future__ import annotations

import time

import pytest

from agl_core.emitter.reward import get_rewards_from_span
from agl_core.utils.otel import unflatten_attributes
from agl_testing.store_conformance import make_span


@pytest.mark.parametrize("index", ["4294967294", "9" * 5_000, "01", "\u00b2"])
def test_a_reward_at_an_absurd_index_is_ignored(index: str) -> None:
    span = make_span("ro-1", "at-1", 1, attributes={f"agentlightning.reward.{index}.value": 1.0})
    started = time.perf_counter()
    assert get_rewards_from_span(span) == []
    assert time.perf_counter() - started < 1.0


def test_dense_indexes_still_make_a_list() -> None:
    flat = {"r.1.value": 2.0, "r.0.value": 1.0, "r.0.name": "primary"}
    assert unflatten_attributes(flat) == {"r": [{"value": 1.0, "name": "primary"}, {"value": 2.0}]}
    assert unflatten_attributes({"r.0": "a", "r.2": "c"}) == {"r": {"0": "a", "2": "c"}}
