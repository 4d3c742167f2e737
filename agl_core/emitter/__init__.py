"""Emitters: record rewards, messages, objects, exceptions, annotations and operations as spans.

Each emitter writes to the tracer active in the current context (``propagate=True``, the default) and
raises ``RuntimeError("No active tracer found. ...")`` when there is none; ``propagate=False`` only builds
the span record. The readers (``get_reward_value``, ``find_final_reward``, ...) accept stored spans and
OpenTelemetry spans alike.
"""

from agl_core.emitter.annotation import emit_annotation
from agl_core.emitter.exception import emit_exception
from agl_core.emitter.message import emit_message, get_message_value
from agl_core.emitter.object import emit_object, get_object_value
from agl_core.emitter.operation import OperationContext, operation
from agl_core.emitter.reward import (
    emit_reward,
    find_final_reward,
    find_reward_spans,
    get_reward_value,
    get_rewards_from_span,
    is_reward_span,
    reward,
)

__all__ = [
    "OperationContext",
    "emit_annotation",
    "emit_exception",
    "emit_message",
    "emit_object",
    "emit_reward",
    "find_final_reward",
    "find_reward_spans",
    "get_message_value",
    "get_object_value",
    "get_reward_value",
    "get_rewards_from_span",
    "is_reward_span",
    "operation",
    "reward",
]
