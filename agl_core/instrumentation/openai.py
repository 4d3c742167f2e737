"""Capture ``openai`` client calls as OpenTelemetry GenAI spans, with the token ids RL training needs.

What does what:

* **Chat completions** are traced by the official ``opentelemetry-instrumentation-openai-v2`` (span
  ``chat {model}``, ``gen_ai.*`` attributes, content as ``gen_ai.input.messages``/``gen_ai.output.messages``
  in the GenAI "parts" format). agl adds only what it lacks: before the official wrapper is installed,
  agl patches ``Completions.create`` itself, so agl's code runs *inside* the official span and sets
  ``prompt_token_ids``, ``response_token_ids``, ``logprobs.content``, ``gen_ai.request.tools``,
  ``agl.llm.source="tracer"`` -- and, for streams, ``gen_ai.response.finish_reasons`` (the official
  wrapper leaves it empty when streaming). It also keeps list-of-parts message content (text and
  ``image_url`` parts, which the official wrapper drops) as ``text`` / ``uri`` parts.
* **Text completions** (``client.completions.create``) are not covered by the official instrumentation;
  agl traces them with the same GenAI library (``opentelemetry-util-genai``), so the span has the same
  shape with operation ``text_completion``.

Content capture: the official libraries read ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``.
When it is unset, :func:`instrument_openai` sets it to ``SPAN_ONLY`` (agl records prompts and answers by
default -- they are the training data); an explicit user value is respected.

Spans are created on :data:`agl_core.tracer._routing.active_tracer_provider` by default: each call lands
in the provider of the tracer active in the calling context, and nothing is recorded outside a trace.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry import trace as trace_api

from agl_core.instrumentation._openai_fields import StreamAccumulator, request_attributes, response_attributes
from agl_core.semconv import GEN_AI_OPERATION_CHAT, GEN_AI_OPERATION_NAME, GEN_AI_OPERATION_TEXT_COMPLETION

__all__ = ["instrument_openai", "is_openai_instrumented", "uninstrument_openai"]

logger = logging.getLogger(__name__)

CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
_CHAT_MODULE = "openai.resources.chat.completions"
_COMPLETIONS_MODULE = "openai.resources.completions"
_MISSING_HELP = (
    "install agl-core[openai] (openai, opentelemetry-instrumentation-openai-v2, "
    "opentelemetry-util-genai==1.0b0, httpx)"
)


class _State:
    """Process-wide instrumentation state; calls nest (reference counted)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.users = 0
        self.provider: trace_api.TracerProvider | None = None
        self.env_was_set = False
        self.instrumentor: Any = None
        self.handler: Any = None
        self.wrappers: list[tuple[type, Any]] = []
        self.original_prepare: Callable[..., Any] | None = None


_state = _State()


# ----------------------------------------------------------------------------------------- helpers


def _set_attributes(span: Any, attributes: Mapping[str, Any]) -> None:
    if attributes and span.is_recording():
        span.set_attributes(dict(attributes))


def _current_llm_span(operation: str) -> Any:
    """The current span if it is a recording GenAI span of ``operation`` (the official one), else None."""
    span = trace_api.get_current_span()
    if not span.is_recording():
        return None
    attributes = getattr(span, "attributes", None) or {}
    return span if attributes.get(GEN_AI_OPERATION_NAME) == operation else None


def _server_attributes(instance: Any) -> dict[str, Any]:
    """``server.address``/``server.port`` from the base URL (the official helper misses httpx2 URLs)."""
    url = getattr(getattr(instance, "_client", None), "base_url", None)
    host, port = getattr(url, "host", None), getattr(url, "port", None)
    attributes: dict[str, Any] = {}
    if isinstance(host, str) and host:
        attributes["server.address"] = host
    if isinstance(port, int) and port != 443:
        attributes["server.port"] = port
    return attributes


def _parsed(result: Any) -> Any:
    """The response model behind a ``with_raw_response`` wrapper (or the result itself)."""
    parse = getattr(result, "parse", None)
    return parse() if callable(parse) and not hasattr(result, "choices") else result


def _is_stream(result: Any) -> bool:
    return hasattr(result, "__next__") or hasattr(result, "__anext__")


class _StreamTap:
    """Proxy of an ``openai`` Stream/AsyncStream that folds chunks into a :class:`StreamAccumulator`.

    ``on_done(accumulator, error)`` runs once, when the stream is exhausted, fails or is closed -- before
    the official wrapper (which iterates this proxy) ends its span.
    """

    def __init__(
        self, stream: Any, on_done: Callable[[StreamAccumulator, BaseException | None], None]
    ) -> None:
        self._stream = stream
        self._on_done = on_done
        self._accumulator = StreamAccumulator()
        self._done = False

    def _finish(self, error: BaseException | None = None) -> None:
        if not self._done:
            self._done = True
            try:
                self._on_done(self._accumulator, error)
            except Exception:  # never break the user's stream because of tracing
                logger.exception("agl openai instrumentation: finishing a streamed call failed")

    def __iter__(self) -> _StreamTap:
        return self

    def __next__(self) -> Any:
        try:
            chunk = next(self._stream)
        except StopIteration:
            self._finish()
            raise
        except Exception as exc:
            self._finish(exc)
            raise
        self._accumulator.add(chunk)
        return chunk

    def __aiter__(self) -> _StreamTap:
        return self

    async def __anext__(self) -> Any:
        try:
            chunk = await self._stream.__anext__()
        except StopAsyncIteration:
            self._finish()
            raise
        except Exception as exc:
            self._finish(exc)
            raise
        self._accumulator.add(chunk)
        return chunk

    def close(self) -> Any:
        """Close the underlying stream (returns its coroutine for async streams)."""
        self._finish()
        return self._stream.close()

    def __enter__(self) -> _StreamTap:
        return self

    def __exit__(self, *exc_info: Any) -> Any:
        self._finish(exc_info[1])
        return self._stream.__exit__(*exc_info)

    async def __aenter__(self) -> _StreamTap:
        return self

    async def __aexit__(self, *exc_info: Any) -> Any:
        self._finish(exc_info[1])
        return await self._stream.__aexit__(*exc_info)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


# ------------------------------------------------------------------------------- chat completions


def _chat_before(instance: Any, kwargs: Mapping[str, Any]) -> Any:
    span = _current_llm_span(GEN_AI_OPERATION_CHAT)
    if span is not None:
        attributes = request_attributes(kwargs)
        if not (getattr(span, "attributes", None) or {}).get("server.address"):
            attributes.update(_server_attributes(instance))
        _set_attributes(span, attributes)
    return span


def _chat_after(span: Any, kwargs: Mapping[str, Any], result: Any) -> Any:
    if span is None:
        return result
    if kwargs.get("stream") is True:
        if not _is_stream(result):
            return result  # a raw-response stream: token ids are not tapped
        return _StreamTap(result, lambda acc, _error: _set_attributes(span, acc.attributes()))
    _set_attributes(span, response_attributes(_parsed(result)))
    return result


def _chat_sync(
    wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    span = _chat_before(instance, kwargs)
    return _chat_after(span, kwargs, wrapped(*args, **kwargs))


async def _chat_async(
    wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    span = _chat_before(instance, kwargs)
    return _chat_after(span, kwargs, await wrapped(*args, **kwargs))


# -------------------------------------------------------------------------------- text completions


def _start_completion(instance: Any, kwargs: Mapping[str, Any]) -> Any:
    from opentelemetry.util.genai.types import InputMessage, Text

    from agl_core.instrumentation._openai_fields import _given

    handler = _state.handler
    server = _server_attributes(instance)
    invocation = handler.inference(
        "openai",
        request_model=_given(kwargs.get("model")) or "",
        server_address=server.get("server.address"),
        server_port=server.get("server.port"),
        operation_name=GEN_AI_OPERATION_TEXT_COMPLETION,
    )
    invocation.temperature = _given(kwargs.get("temperature"))
    invocation.top_p = _given(kwargs.get("top_p"))
    invocation.max_tokens = _given(kwargs.get("max_tokens"))
    invocation.seed = _given(kwargs.get("seed"))
    invocation.frequency_penalty = _given(kwargs.get("frequency_penalty"))
    invocation.presence_penalty = _given(kwargs.get("presence_penalty"))
    stop = _given(kwargs.get("stop"))
    if stop is not None:
        invocation.stop_sequences = [stop] if isinstance(stop, str) else list(stop)
    if handler.should_capture_content():
        prompt = _given(kwargs.get("prompt"))
        prompts = [prompt] if isinstance(prompt, str) else prompt if isinstance(prompt, list) else []
        invocation.input_messages = [
            InputMessage(role="user", parts=[Text(content=p)]) for p in prompts if isinstance(p, str)
        ]
    _set_attributes(invocation.span, request_attributes(kwargs))
    return invocation


def _output_messages(texts: Mapping[int, str], finish_reasons: Mapping[int, str | None]) -> list[Any]:
    from opentelemetry.util.genai.types import OutputMessage, Text

    return [
        OutputMessage(
            role="assistant", parts=[Text(content=texts[i])], finish_reason=finish_reasons.get(i) or "error"
        )
        for i in sorted(texts)
    ]


def _finish_completion(invocation: Any, response: Any) -> None:
    choices = getattr(response, "choices", None) or []
    invocation.response_model_name = getattr(response, "model", None)
    invocation.response_id = getattr(response, "id", None)
    invocation.finish_reasons = [choice.finish_reason or "error" for choice in choices]
    usage = getattr(response, "usage", None)
    if usage is not None:
        invocation.input_tokens = usage.prompt_tokens
        invocation.output_tokens = usage.completion_tokens
    if _state.handler.should_capture_content():
        invocation.output_messages = _output_messages(
            {c.index: c.text or "" for c in choices}, {c.index: c.finish_reason for c in choices}
        )
    _set_attributes(invocation.span, response_attributes(response))
    invocation.stop()


def _finish_completion_stream(invocation: Any, acc: StreamAccumulator, error: BaseException | None) -> None:
    invocation.response_model_name = acc.model
    invocation.response_id = acc.id
    if acc.usage is not None:
        invocation.input_tokens = acc.usage.prompt_tokens
        invocation.output_tokens = acc.usage.completion_tokens
    if _state.handler.should_capture_content():
        texts = {index: "".join(parts) for index, parts in acc.texts.items()}
        invocation.output_messages = _output_messages(texts, acc.finish_reasons)
    invocation.finish_reasons = [acc.finish_reasons[i] for i in sorted(acc.finish_reasons)]
    _set_attributes(invocation.span, acc.attributes())
    if error is not None:
        invocation.fail(error)
    else:
        invocation.stop()


def _completion_after(invocation: Any, kwargs: Mapping[str, Any], result: Any) -> Any:
    if kwargs.get("stream") is True and _is_stream(result):
        return _StreamTap(result, lambda acc, error: _finish_completion_stream(invocation, acc, error))
    _finish_completion(invocation, _parsed(result))
    return result


def _completion_sync(
    wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    invocation = _start_completion(instance, kwargs)
    try:
        result = wrapped(*args, **kwargs)
    except Exception as exc:
        invocation.fail(exc)
        raise
    return _completion_after(invocation, kwargs, result)


async def _completion_async(
    wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    invocation = _start_completion(instance, kwargs)
    try:
        result = await wrapped(*args, **kwargs)
    except Exception as exc:
        invocation.fail(exc)
        raise
    return _completion_after(invocation, kwargs, result)


# ------------------------------------------------------------------------ multi-part message content


def _content_parts(content: Any) -> list[Any]:
    """GenAI parts for OpenAI list-of-parts content: text parts and image URLs."""
    from opentelemetry.util.genai.types import Text, Uri

    parts: list[Any] = []
    for part in content:
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind == "text" and isinstance(part.get("text"), str):
            parts.append(Text(content=part["text"]))
        elif kind == "image_url":
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, Mapping) else image
            if isinstance(url, str):
                parts.append(Uri(mime_type=None, modality="image", uri=url))
    return parts


def _prepare_input_messages_with_parts(messages: Any) -> Any:
    """The official conversion, plus the text/image parts of list-valued contents it drops."""
    assert _state.original_prepare is not None
    converted = _state.original_prepare(messages)
    for message, result in zip(messages or [], converted, strict=False):
        content = (
            message.get("content") if isinstance(message, Mapping) else getattr(message, "content", None)
        )
        if isinstance(content, list) and not any(
            getattr(p, "type", None) in ("text", "uri") for p in result.parts
        ):
            result.parts.extend(_content_parts(content))
    return converted


# ------------------------------------------------------------------------------------ install


def _import_requirements() -> tuple[Any, Any, Any]:
    try:
        import openai  # noqa: F401
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
        from opentelemetry.instrumentation.openai_v2 import utils as official_utils
        from opentelemetry.util.genai.handler import TelemetryHandler
    except ImportError as exc:
        raise ImportError(
            f"Tracing openai calls needs packages that are missing ({exc}); {_MISSING_HELP}."
        ) from exc
    return OpenAIInstrumentor, official_utils, TelemetryHandler


def _wrap(module: str, target: str, wrapper: Callable[..., Any]) -> None:
    import importlib

    import wrapt

    owner = importlib.import_module(module)
    class_name, method = target.split(".")
    cls = getattr(owner, class_name)
    wrapt.wrap_function_wrapper(cls, method, wrapper)
    _state.wrappers.append((cls, wrapper))


def _unwrap_all() -> None:
    for cls, wrapper in reversed(_state.wrappers):
        current = cls.__dict__.get("create")
        if getattr(current, "_self_wrapper", None) is wrapper:
            cls.create = current.__wrapped__
        else:
            logger.warning("%s.create was re-wrapped by someone else; leaving agl's wrapper in place.", cls)
    _state.wrappers.clear()


def is_openai_instrumented() -> bool:
    """Whether :func:`instrument_openai` is in effect."""
    return _state.users > 0


def instrument_openai(tracer_provider: trace_api.TracerProvider | None = None) -> None:
    """Trace ``openai`` chat and text completions (sync, async, streaming) as GenAI spans with token ids.

    ``tracer_provider`` defaults to agl's active-tracer provider (spans go to the tracer active where
    the call is made; nothing is recorded outside a trace). Calls nest: each needs one
    :func:`uninstrument_openai`; the first call's provider is kept. Raises ``ImportError`` naming the
    missing packages when the ``openai`` extra is not installed.
    """
    instrumentor_cls, official_utils, handler_cls = _import_requirements()
    with _state.lock:
        if _state.users > 0:
            _state.users += 1
            if tracer_provider is not None and tracer_provider is not _state.provider:
                logger.warning(
                    "openai is already instrumented by agl with another provider; keeping that one."
                )
            return
        if tracer_provider is None:
            from agl_core.tracer._routing import active_tracer_provider

            tracer_provider = active_tracer_provider
        if CAPTURE_CONTENT_ENV not in os.environ:
            os.environ[CAPTURE_CONTENT_ENV] = "SPAN_ONLY"
            _state.env_was_set = True
        instrumentor = instrumentor_cls()
        if instrumentor.is_instrumented_by_opentelemetry:
            logger.warning(
                "openai was already instrumented by OpenTelemetry elsewhere; its chat spans go to that "
                "instrumentation's provider and agl cannot add token ids to them. Call "
                "OpenAIInstrumentor().uninstrument() before starting agl to let agl capture LLM calls."
            )
        else:
            # agl's chat wrappers go first so the official wrapper encloses them (they run inside its span).
            _wrap(_CHAT_MODULE, "Completions.create", _chat_sync)
            _wrap(_CHAT_MODULE, "AsyncCompletions.create", _chat_async)
            instrumentor.instrument(tracer_provider=tracer_provider)
            _state.instrumentor = instrumentor
        _wrap(_COMPLETIONS_MODULE, "Completions.create", _completion_sync)
        _wrap(_COMPLETIONS_MODULE, "AsyncCompletions.create", _completion_async)
        _state.handler = handler_cls(tracer_provider=tracer_provider)
        original = getattr(official_utils, "_prepare_input_messages", None)
        if callable(original):
            _state.original_prepare = original
            official_utils._prepare_input_messages = _prepare_input_messages_with_parts
        _state.provider = tracer_provider
        _state.users = 1


def uninstrument_openai() -> None:
    """Undo one :func:`instrument_openai`; the last one removes every patch (no-op when not instrumented)."""
    with _state.lock:
        if _state.users == 0:
            return
        _state.users -= 1
        if _state.users > 0:
            return
        if _state.instrumentor is not None:
            _state.instrumentor.uninstrument()
            _state.instrumentor = None
        _unwrap_all()
        if _state.original_prepare is not None:
            from opentelemetry.instrumentation.openai_v2 import utils as official_utils

            official_utils._prepare_input_messages = _state.original_prepare
            _state.original_prepare = None
        if _state.env_was_set:
            os.environ.pop(CAPTURE_CONTENT_ENV, None)
            _state.env_was_set = False
        _state.handler = None
        _state.provider = None
