"""Rewards: ``emit_reward`` (scalar or named multi-dimensional), readers, and the deprecated decorator.

A reward is an ``agentlightning.annotation`` span whose attributes hold the dimensions as
``agentlightning.reward.<i>.name`` / ``.value``; dimension 0 is the primary reward.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
import numbers
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar, cast

from pydantic import ValidationError

from agl_core.emitter.annotation import emit_annotation
from agl_core.semconv import AGL_ANNOTATION, AGL_REWARD, LightningSpanAttributes, RewardPydanticModel
from agl_core.types import SpanCoreFields, SpanLike
from agl_core.utils.otel import filter_and_unflatten_attributes

__all__ = [
    "emit_reward",
    "find_final_reward",
    "find_reward_spans",
    "get_reward_value",
    "get_rewards_from_span",
    "is_reward_span",
    "reward",
]

logger = logging.getLogger(__name__)

_REWARD_PREFIX = LightningSpanAttributes.REWARD.value
_AGENTOPS_OUTPUT_KEYS = ("agentops.task.output", "agentops.entity.output")
_SpanT = TypeVar("_SpanT", bound=SpanLike)
_FnT = TypeVar("_FnT", bound=Callable[..., Any])


def _as_number(value: object) -> float | None:
    """``float(value)`` for real numbers (bool and int included), else None."""
    if isinstance(value, numbers.Real):
        return float(value)
    return None


def emit_reward(
    reward: float | Mapping[str, float],
    *,
    primary_key: str | None = None,
    attributes: dict[str, Any] | None = None,
    propagate: bool = True,
) -> SpanCoreFields:
    """Emit a reward span.

    A number (int and bool become float) is stored as the dimension ``primary``. A dict of named numbers
    needs ``primary_key``: that dimension comes first, the others follow in dict order. Extra
    ``attributes`` (e.g. ``make_link_attributes({"gen_ai.response.id": ...})`` to tie the reward to one
    LLM call) are added to the span.

    Raises:
        TypeError: ``reward`` is neither a number nor a dict.
        ValueError: a dict value is not a number, or ``primary_key`` is missing or not a key of the dict.
    """
    dimensions: list[dict[str, Any]]
    if isinstance(reward, Mapping):
        values: dict[str, float] = {}
        for key, value in reward.items():
            number = _as_number(value)
            if number is None:
                raise ValueError(f"Reward dimension {key!r} must be a number, got {type(value).__name__}.")
            values[str(key)] = number
        if primary_key is None:
            raise ValueError(
                "A multi-dimensional reward (dict) needs primary_key=<name of the dimension to optimize>."
            )
        if primary_key not in values:
            raise ValueError(f"primary_key {primary_key!r} is not one of the reward's keys {list(values)}.")
        dimensions = [{"name": primary_key, "value": values[primary_key]}]
        dimensions += [{"name": key, "value": value} for key, value in values.items() if key != primary_key]
    else:
        number = _as_number(reward)
        if number is None:
            raise TypeError(
                "Reward must be a number (float, int or bool) or a dict of them, "
                f"got {type(reward).__name__}."
            )
        dimensions = [{"name": "primary", "value": number}]
    return emit_annotation({**(attributes or {}), _REWARD_PREFIX: dimensions}, propagate=propagate)


def get_rewards_from_span(span: SpanLike) -> list[RewardPydanticModel]:
    """All reward dimensions of a span, primary first; empty when it has none."""
    attributes = span.attributes or {}
    dotted = _REWARD_PREFIX + "."
    if not any(key.startswith(dotted) for key in attributes):
        return []
    found = filter_and_unflatten_attributes(
        {k: v for k, v in attributes.items() if k != _REWARD_PREFIX}, _REWARD_PREFIX
    )
    if not isinstance(found, list):
        logger.warning("Span %r has malformed reward attributes %s; ignoring them.", span.name, found)
        return []
    try:
        return [RewardPydanticModel.model_validate(item) for item in found]
    except ValidationError as exc:
        logger.warning("Span %r has malformed reward dimensions: %s", span.name, exc)
        return []


def _agentops_reward(attributes: Mapping[str, Any]) -> float | None:
    for key in _AGENTOPS_OUTPUT_KEYS:
        output = attributes.get(key)
        if isinstance(output, str):
            try:
                output = json.loads(output)
            except json.JSONDecodeError:
                continue
        if isinstance(output, Mapping) and output.get("type") == "reward":
            number = _as_number(output.get("value"))
            if number is not None:
                warnings.warn(
                    "Reading a reward from an AgentOps operation output is deprecated; emit rewards with "
                    "emit_reward().",
                    DeprecationWarning,
                    stacklevel=3,
                )
                return number
    return None


def get_reward_value(span: SpanLike) -> float | None:
    """The primary reward of a span, or None if it is not a reward span.

    Checked in order: agl/0.3 dimensions (``agentlightning.reward.0.value``), an AgentOps output
    ``{"type": "reward", "value": x}`` (deprecated), and the 0.2 form (an annotation or
    ``agentlightning.reward`` span with a numeric ``reward`` attribute).
    """
    dimensions = get_rewards_from_span(span)
    if dimensions:
        return dimensions[0].value
    attributes = span.attributes or {}
    legacy = _agentops_reward(attributes)
    if legacy is not None:
        return legacy
    if span.name in (AGL_ANNOTATION, AGL_REWARD):
        return _as_number(attributes.get("reward"))
    return None


def is_reward_span(span: SpanLike) -> bool:
    """Whether the span carries a reward (see :func:`get_reward_value`)."""
    return get_reward_value(span) is not None


def find_reward_spans(spans: Sequence[_SpanT]) -> list[_SpanT]:
    """The reward spans among ``spans``, in order."""
    return [span for span in spans if is_reward_span(span)]


def find_final_reward(spans: Sequence[SpanLike]) -> float | None:
    """The primary value of the last reward span in ``spans`` (None when there is none)."""
    for span in reversed(spans):
        value = get_reward_value(span)
        if value is not None:
            return value
    return None


def reward(fn: _FnT) -> _FnT:
    """Deprecated: decorate a (sync or async) function returning a float so its result is emitted as a reward.

    Use :func:`emit_reward` instead. The function's return value is passed through unchanged.
    """
    warnings.warn(
        "The @reward decorator is deprecated; call emit_reward(value) instead.",
        DeprecationWarning,
        stacklevel=2,
    )

    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            result = await fn(*args, **kwargs)
            emit_reward(result)
            return result

        return cast(_FnT, async_wrapper)

    @functools.wraps(fn)
    def sync_wrapper(*args: Any, **kwargs: Any) -> Any:
        result = fn(*args, **kwargs)
        emit_reward(result)
        return result

    return cast(_FnT, sync_wrapper)
