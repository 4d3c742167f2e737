"""Turning what an agent returned into spans in the store (the runner's post-processing step)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agl_core.types import AttemptedRollout, Span, SpanCoreFields

if TYPE_CHECKING:
    from agl_core.store.base import LightningStore

__all__ = ["exception_span", "spans_from_result"]

logger = logging.getLogger(__name__)

_UNBOUND_IDS = frozenset({"", "rollout-dummy", "attempt-dummy"})
_EXPECTED = (
    "None (spans come from the tracer), a float reward, or a list of spans (agl.Span, OpenTelemetry "
    "ReadableSpan or SpanCoreFields)"
)


def _readable_span_type() -> type | None:
    try:
        from opentelemetry.sdk.trace import ReadableSpan
    except ImportError:  # pragma: no cover - the SDK is a core dependency
        return None
    return ReadableSpan


def _ids(rollout: AttemptedRollout) -> tuple[str, str]:
    return rollout.rollout_id, rollout.attempt.attempt_id


async def _store_core_fields(
    store: LightningStore, rollout: AttemptedRollout, cores: Sequence[SpanCoreFields]
) -> list[Span]:
    """Give each record a fresh sequence id of the rollout, turn it into a span and store the batch."""
    rollout_id, attempt_id = _ids(rollout)
    sequence_ids = await store.get_many_span_sequence_ids([(rollout_id, attempt_id)] * len(cores))
    spans = [
        Span.from_core_fields(core, rollout_id=rollout_id, attempt_id=attempt_id, sequence_id=seq)
        for core, seq in zip(cores, sequence_ids, strict=True)
    ]
    await store.add_many_spans(spans)
    return spans


async def _reward_spans(
    store: LightningStore, rollout: AttemptedRollout, reward: float, trace: list[Any]
) -> list[Any]:
    """The trace plus a reward span for ``reward``, unless the trace already ends with that reward.

    Fixes Agent Lightning 0.3 quirk 12 in docs/migrating-from-agent-lightning.md (a float result always added
    a second reward span): when the
    agent called ``emit_reward(r)`` and returned ``r``, nothing is added. A different returned value is
    the final reward and is recorded after the agent's own rewards.
    """
    from agl_core.emitter import emit_reward, find_final_reward

    if trace and find_final_reward(trace) == reward:
        return trace
    added = await _store_core_fields(store, rollout, [emit_reward(reward, propagate=False)])
    return [*trace, *added]


def _as_number(result: bool | int | float, warned: set[str]) -> float:
    if not isinstance(result, float) and type(result).__name__ not in warned:
        warned.add(type(result).__name__)
        logger.warning(  # 0.3's sentence first (0.3 code matches it), then agl's
            "Reward is not a number, got: %s. The agent returned a %s reward (%r); it is recorded as a "
            "float.",
            type(result),
            type(result).__name__,
            result,
        )
    return float(result)


def _retag(span: Span, rollout: AttemptedRollout) -> Span:
    """Attribute a span built without ids (``Span.from_attributes`` defaults) to the current attempt."""
    if span.rollout_id in _UNBOUND_IDS or span.attempt_id in _UNBOUND_IDS:
        rollout_id, attempt_id = _ids(rollout)
        return span.model_copy(update={"rollout_id": rollout_id, "attempt_id": attempt_id})
    return span


async def spans_from_result(
    result: Any,
    *,
    store: LightningStore,
    rollout: AttemptedRollout,
    trace: list[Any],
    warned: set[str],
) -> list[Any]:
    """Store what the agent returned and give back the rollout's spans (for hooks and logs).

    * ``None``: the tracer's spans (already in the store).
    * ``float`` (``int``/``bool`` converted with a warning): a reward span, unless the trace already ends
      with that reward.
    * ``list[ReadableSpan]``: each converted and stored (spans the tracer already stored are skipped by
      the store as duplicates).
    * ``list[Span]``: stored as given; spans without rollout/attempt ids get the current ones.
    * ``list[SpanCoreFields]``: given sequence ids and stored.
    * ``[]``: a warning; the tracer's spans.

    Raises:
        ValueError: a list mixing span kinds or holding something else.
        TypeError: any other result type.
    """
    if result is None:
        return trace
    if isinstance(result, (bool, int, float)):
        return await _reward_spans(store, rollout, _as_number(result, warned), trace)
    if not isinstance(result, list):
        raise TypeError(  # 0.3's sentence first (0.3 code matches it), then agl's
            f"Invalid raw result type. The agent returned {type(result).__name__} {result!r:.200}; "
            f"expected {_EXPECTED}."
        )
    if not result:
        logger.warning("Rollout %s: the agent returned an empty list of spans.", rollout.rollout_id)
        return trace
    readable = _readable_span_type()
    if all(isinstance(item, Span) for item in result):
        spans = [_retag(item, rollout) for item in result]
        await store.add_many_spans(spans)
        return spans
    if all(isinstance(item, SpanCoreFields) for item in result):
        return await _store_core_fields(store, rollout, result)
    if readable is not None and all(isinstance(item, readable) for item in result):
        rollout_id, attempt_id = _ids(rollout)
        stored: list[Any] = []
        for item in result:
            span = await store.add_otel_span(rollout_id, attempt_id, item)
            stored.append(span if span is not None else item)
        return stored
    kinds = sorted({type(item).__name__ for item in result})
    raise ValueError(
        f"Invalid raw result type. The agent returned a list of {', '.join(kinds)}; a list result must "
        "hold only agl.Span, only OpenTelemetry ReadableSpan or only SpanCoreFields objects."
    )


async def exception_span(store: LightningStore, rollout: AttemptedRollout, exc: BaseException) -> Span | None:
    """Record ``exc`` as an ``agentlightning.exception`` span of the attempt; None (logged) if that fails.

    The record is what ``emit_exception(exc, propagate=False)`` builds (OpenTelemetry ``exception.*``
    attributes, status OK); that function returns nothing, so the runner builds it the same way here.
    """
    from agl_core.semconv import AGL_EXCEPTION
    from agl_core.tracer import DummyTracer
    from agl_core.types import TraceStatus
    from agl_core.utils.otel import format_exception_attributes

    try:
        core = DummyTracer().create_span(
            AGL_EXCEPTION, attributes=format_exception_attributes(exc), status=TraceStatus(status_code="OK")
        )
        (span,) = await _store_core_fields(store, rollout, [core])
        return span
    except Exception:
        logger.exception("Rollout %s: could not record the agent's exception as a span.", rollout.rollout_id)
        return None
