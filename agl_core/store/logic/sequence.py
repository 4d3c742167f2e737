"""Span sequence ids: planning a batch of issued ids and numbering spans that come without one."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from agl_core.semconv import LightningResourceAttributes

if TYPE_CHECKING:
    from agl_core.types import Span

__all__ = ["number_span", "plan_sequence_ids"]

_RESOURCE_KEY = LightningResourceAttributes.SPAN_SEQUENCE_ID.value


def plan_sequence_ids(
    rollout_ids: Sequence[str], current: Callable[[str], int]
) -> tuple[list[int], dict[str, int]]:
    """Issue one sequence id per entry of `rollout_ids` (per-rollout counters, no gaps).

    `current(rollout_id)` returns the last id issued for that rollout (0 if none). Returns the ids in
    input order and the new counter value of each rollout involved, to persist atomically.
    """
    counters: dict[str, int] = {}
    issued: list[int] = []
    for rollout_id in rollout_ids:
        value = counters.get(rollout_id)
        if value is None:
            value = current(rollout_id)
        value += 1
        counters[rollout_id] = value
        issued.append(value)
    return issued, counters


def number_span(span: Span, sequence_id: int) -> Span:
    """`span` (which came with ``sequence_id`` 0, "assign one") with the id the store issued.

    A resource attribute ``agentlightning.span_sequence_id`` of 0 (the tracer and the LLM proxy stamp
    the span's identity there) gets the same id.
    """
    update: dict[str, Any] = {"sequence_id": sequence_id}
    attributes = span.resource.attributes
    if attributes.get(_RESOURCE_KEY) == 0:
        update["resource"] = span.resource.model_copy(
            update={"attributes": {**attributes, _RESOURCE_KEY: sequence_id}}
        )
    return span.model_copy(update=update)
