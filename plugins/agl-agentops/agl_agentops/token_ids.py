"""Token ids, logprobs and tools on AgentOps' OpenAI chat spans (``openai.chat.completion``).

AgentOps records the messages of a chat call but not what RL training needs. These patches add, with the
core tracer's attribute names (so ``TracerTraceToTriplet`` works on AgentOps spans):
``prompt_token_ids``, ``response_token_ids``, ``logprobs.content`` (when the server returns them, vLLM's
``return_token_ids`` format), ``gen_ai.tool.definitions`` and ``agl.llm.source``. It also drops the
``None``-valued attributes AgentOps reports for absent fields (not valid OpenTelemetry values).

Where: AgentOps' chat wrapper computes its span attributes with ``handle_chat_attributes`` (looked up in
its ``stream_wrapper`` module at call time) and feeds streamed chunks through its stream wrappers'
``_process_chunk`` / ``_finalize_stream``. Wrapping those three points works whatever the order in which
AgentOps and agl were set up. Calls nest (reference counted); the last :func:`uninstrument_token_ids`
restores AgentOps' originals.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import threading
from collections.abc import Callable
from typing import Any

from agl_agentops._core import StreamAccumulator, request_attributes, response_attributes

__all__ = ["instrument_token_ids", "is_token_ids_instrumented", "uninstrument_token_ids"]

logger = logging.getLogger("agl_core.tracer.agentops.token_ids")

_MODULE = "agentops.instrumentation.providers.openai.stream_wrapper"
_STREAM_CLASSES = ("OpenaiStreamWrapper", "OpenAIAsyncStreamWrapper")
_ACCUMULATOR = "_agl_token_ids"

_lock = threading.Lock()
_users = 0
_restore: list[Callable[[], None]] = []


def _parsed(result: Any) -> Any:
    """The response model behind a ``with_raw_response`` result (or the result itself)."""
    parse = getattr(result, "parse", None)
    return parse() if callable(parse) and not hasattr(result, "choices") else result


def _extra_attributes(kwargs: Any, return_value: Any) -> dict[str, Any]:
    request = kwargs if isinstance(kwargs, dict) else {}
    extra = request_attributes(request)
    if return_value is not None and request.get("stream") is not True:
        extra.update(response_attributes(_parsed(return_value)))
    return extra


def _patch_handler(original: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
    @functools.wraps(original)
    def handle_chat_attributes(*args: Any, **kwargs: Any) -> dict[str, Any]:
        # AgentOps reports absent fields (e.g. a tool without description) as None; a None attribute is
        # not a valid OpenTelemetry value and would make the whole span unstorable, so drop those.
        attributes = {key: value for key, value in original(*args, **kwargs).items() if value is not None}
        try:
            extra = _extra_attributes(kwargs.get("kwargs") or {}, kwargs.get("return_value"))
        except Exception:  # tracing must never break the agent's call
            logger.exception("agl-agentops: reading token ids from a chat call failed")
            return attributes
        return {**attributes, **extra}

    handle_chat_attributes._agl_original = original  # type: ignore[attr-defined]
    return handle_chat_attributes


def _patch_process_chunk(original: Callable[[Any, Any], None]) -> Callable[[Any, Any], None]:
    @functools.wraps(original)
    def _process_chunk(self: Any, chunk: Any) -> None:
        try:
            accumulator = self.__dict__.get(_ACCUMULATOR)
            if accumulator is None:
                accumulator = self.__dict__[_ACCUMULATOR] = StreamAccumulator()
            accumulator.add(chunk)
        except Exception:
            logger.exception("agl-agentops: reading token ids from a stream chunk failed")
        original(self, chunk)

    return _process_chunk


def _patch_finalize(original: Callable[[Any], None]) -> Callable[[Any], None]:
    @functools.wraps(original)
    def _finalize_stream(self: Any) -> None:
        accumulator = self.__dict__.get(_ACCUMULATOR)
        span = getattr(self, "_span", None)
        if accumulator is not None and span is not None and span.is_recording():
            try:
                span.set_attributes(accumulator.attributes())
            except Exception:
                logger.exception("agl-agentops: recording a stream's token ids failed")
        original(self)

    return _finalize_stream


def _set(owner: Any, name: str, value: Any) -> None:
    original = owner.__dict__[name]
    setattr(owner, name, value)
    _restore.append(lambda: setattr(owner, name, original))


def is_token_ids_instrumented() -> bool:
    """Whether :func:`instrument_token_ids` is in effect."""
    return _users > 0


def instrument_token_ids() -> bool:
    """Add agl's attributes to AgentOps' OpenAI chat spans; False when ``openai`` is not installed."""
    global _users
    if importlib.util.find_spec("openai") is None:
        logger.debug("openai is not installed; no token ids to add to AgentOps spans.")
        return False
    module = importlib.import_module(_MODULE)
    with _lock:
        _users += 1
        if _users > 1:
            return True
        _set(module, "handle_chat_attributes", _patch_handler(module.handle_chat_attributes))
        for class_name in _STREAM_CLASSES:
            cls = getattr(module, class_name)
            _set(cls, "_process_chunk", _patch_process_chunk(cls.__dict__["_process_chunk"]))
            _set(cls, "_finalize_stream", _patch_finalize(cls.__dict__["_finalize_stream"]))
    return True


def uninstrument_token_ids() -> None:
    """Undo one :func:`instrument_token_ids`; the last one restores AgentOps' code (no-op if not applied)."""
    global _users
    with _lock:
        if _users == 0:
            return
        _users -= 1
        if _users:
            return
        while _restore:
            _restore.pop()()
