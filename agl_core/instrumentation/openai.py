"""Capture ``openai`` client calls as OpenTelemetry GenAI spans, with the token ids RL training needs.

Covered, sync and async, streamed and not: chat completions (``chat.completions.create`` and
``.parse``; the ``.stream()`` helpers go through ``create``), text completions (``completions.create``)
and the Responses API (``responses.create`` and ``.parse``; ``responses.stream()`` goes through
``create``). One span per call, named ``"{operation} {model}"`` (``chat``, ``text_completion``,
``responses``), kind CLIENT, with the current GenAI attributes: ``gen_ai.operation.name``,
``gen_ai.provider.name``, ``gen_ai.request.*``, ``gen_ai.response.id`` / ``.model`` /
``.finish_reasons``, ``gen_ai.usage.*``, ``server.address`` / ``.port``, ``gen_ai.tool.definitions``,
and content as ``gen_ai.input.messages`` / ``gen_ai.output.messages`` / ``gen_ai.system_instructions``
in the "parts" format (:mod:`agl_core.instrumentation._genai_parts`). agl adds ``prompt_token_ids``,
``response_token_ids`` and ``logprobs.content`` when the server returns them, and
``agl.llm.source="tracer"``. A failed call ends its span with status ERROR and ``error.type``.

Why agl's own instrumentation (wrapt, on the public ``create`` / ``parse`` methods) and not the official
``opentelemetry-instrumentation-openai-v2``: its latest release (2.4b0) imports
``opentelemetry.util.genai.instruments``, which ``opentelemetry-util-genai`` removed in 1.1b0, so using
it pins ``util-genai==1.0b0`` and makes every other GenAI instrumentation built on the current 1.3b0
uninstallable beside agl; it also covers neither text completions nor the Responses API, drops
list-of-parts content, and adding token ids to its spans meant patching its private
``_prepare_input_messages``. Writing the attributes directly costs a few hundred lines, needs only
``openai`` and ``wrapt``, and installs beside any version of the official GenAI packages.

Content capture: on by default (prompts and answers are the training data). The GenAI switch
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` set to ``false``/``0``/``NO_CONTENT``/
``EVENT_ONLY`` turns it off (token ids are still recorded).

Spans are created on :data:`agl_core.tracer.routing.active_tracer_provider` by default: each call lands
in the provider of the tracer active in the calling context, and nothing is recorded outside a trace.
A call made while another agl-instrumented call is in progress on the same context (``parse`` calling
``create``) records one span.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import json
import logging
import os
import threading
from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry import trace as trace_api
from opentelemetry.trace import SpanKind, Status, StatusCode

from agl_core.instrumentation import _genai_parts as parts
from agl_core.instrumentation._openai_fields import (
    StreamAccumulator,
    _given,
    request_attributes,
    response_attributes,
    responses_api_attributes,
)
from agl_core.semconv import (
    GEN_AI_INPUT_MESSAGES,
    GEN_AI_OPERATION_CHAT,
    GEN_AI_OPERATION_NAME,
    GEN_AI_OPERATION_RESPONSES,
    GEN_AI_OPERATION_TEXT_COMPLETION,
    GEN_AI_OUTPUT_MESSAGES,
    GEN_AI_PROVIDER_NAME,
    GEN_AI_REQUEST_MODEL,
    GEN_AI_RESPONSE_FINISH_REASONS,
    GEN_AI_RESPONSE_ID,
    GEN_AI_RESPONSE_MODEL,
    GEN_AI_SYSTEM_INSTRUCTIONS,
    GEN_AI_USAGE_INPUT_TOKENS,
    GEN_AI_USAGE_OUTPUT_TOKENS,
)

__all__ = ["CAPTURE_CONTENT_ENV", "instrument_openai", "is_openai_instrumented", "uninstrument_openai"]

logger = logging.getLogger(__name__)

CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
_NO_CONTENT = ("false", "0", "no", "off", "no_content", "none", "event_only")
_SCOPE = "agl_core.instrumentation.openai"
_MISSING_HELP = "install agl-core[openai] (openai, wrapt)"

# (request parameter, span attribute) pairs recorded when the call gives them
_REQUEST_PARAMS = (
    ("temperature", "gen_ai.request.temperature"),
    ("top_p", "gen_ai.request.top_p"),
    ("max_tokens", "gen_ai.request.max_tokens"),
    ("max_completion_tokens", "gen_ai.request.max_tokens"),
    ("max_output_tokens", "gen_ai.request.max_tokens"),
    ("seed", "gen_ai.request.seed"),
    ("frequency_penalty", "gen_ai.request.frequency_penalty"),
    ("presence_penalty", "gen_ai.request.presence_penalty"),
    ("n", "gen_ai.request.choice.count"),
)

# (module, class, method, operation)
_TARGETS = (
    ("openai.resources.chat.completions", "Completions", "create", GEN_AI_OPERATION_CHAT),
    ("openai.resources.chat.completions", "AsyncCompletions", "create", GEN_AI_OPERATION_CHAT),
    ("openai.resources.chat.completions", "Completions", "parse", GEN_AI_OPERATION_CHAT),
    ("openai.resources.chat.completions", "AsyncCompletions", "parse", GEN_AI_OPERATION_CHAT),
    ("openai.resources.completions", "Completions", "create", GEN_AI_OPERATION_TEXT_COMPLETION),
    ("openai.resources.completions", "AsyncCompletions", "create", GEN_AI_OPERATION_TEXT_COMPLETION),
    ("openai.resources.responses", "Responses", "create", GEN_AI_OPERATION_RESPONSES),
    ("openai.resources.responses", "AsyncResponses", "create", GEN_AI_OPERATION_RESPONSES),
    ("openai.resources.responses", "Responses", "parse", GEN_AI_OPERATION_RESPONSES),
    ("openai.resources.responses", "AsyncResponses", "parse", GEN_AI_OPERATION_RESPONSES),
)

_IN_CALL: contextvars.ContextVar[bool] = contextvars.ContextVar("agl_openai_in_call", default=False)


class _State:
    """Process-wide instrumentation state; calls nest (reference counted)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.users = 0
        self.tracer: trace_api.Tracer | None = None
        self.provider: trace_api.TracerProvider | None = None
        self.wrappers: list[tuple[type, str, Any]] = []


_state = _State()


def _capture_content() -> bool:
    return os.environ.get(CAPTURE_CONTENT_ENV, "").strip().lower() not in _NO_CONTENT


def _dumps(value: Any) -> str:
    return json.dumps(value, default=str, ensure_ascii=False)


def _server_attributes(instance: Any) -> dict[str, Any]:
    """``server.address``/``server.port`` of the client's base URL."""
    url = getattr(getattr(instance, "_client", None), "base_url", None)
    host, port = getattr(url, "host", None), getattr(url, "port", None)
    attributes: dict[str, Any] = {}
    if isinstance(host, str) and host:
        attributes["server.address"] = host
    if isinstance(port, int) and port != 443:
        attributes["server.port"] = port
    return attributes


def _is_raw_response(result: Any) -> bool:
    """A ``with_raw_response`` / ``with_streaming_response`` result: the body comes from ``parse()``."""
    return callable(getattr(result, "parse", None)) and hasattr(result, "http_response")


def _is_stream(result: Any) -> bool:
    return hasattr(result, "__next__") or hasattr(result, "__anext__")


# ------------------------------------------------------------------------------------ span lifecycle


class _Call:
    """One traced call: its span, operation and request; finishes the span from a result or an error."""

    def __init__(self, operation: str, instance: Any, kwargs: Mapping[str, Any]) -> None:
        assert _state.tracer is not None
        self.operation = operation
        self.kwargs = kwargs
        self.capture = _capture_content()
        model = _given(kwargs.get("model"))
        model_name = str(model) if model else ""
        attributes: dict[str, Any] = {
            GEN_AI_OPERATION_NAME: operation,
            GEN_AI_PROVIDER_NAME: "openai",
            **_server_attributes(instance),
            **request_attributes(kwargs),
        }
        if model_name:
            attributes[GEN_AI_REQUEST_MODEL] = model_name
        for param, key in _REQUEST_PARAMS:
            value = _given(kwargs.get(param))
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                attributes[key] = value
        stop = _given(kwargs.get("stop"))
        if stop:
            attributes["gen_ai.request.stop_sequences"] = [stop] if isinstance(stop, str) else list(stop)
        if self.capture:
            attributes.update(self._input_content())
        name = f"{operation} {model_name}" if model_name else operation
        self.span = _state.tracer.start_span(name, kind=SpanKind.CLIENT, attributes=attributes)

    def _input_content(self) -> dict[str, Any]:
        kwargs = self.kwargs
        if self.operation == GEN_AI_OPERATION_CHAT:
            messages = parts.chat_input_messages(_given(kwargs.get("messages")) or [])
            return {GEN_AI_INPUT_MESSAGES: _dumps(messages)}
        if self.operation == GEN_AI_OPERATION_TEXT_COMPLETION:
            prompt = _given(kwargs.get("prompt"))
            prompts = [prompt] if isinstance(prompt, str) else prompt if isinstance(prompt, list) else []
            messages = [parts.text_message("user", p) for p in prompts if isinstance(p, str)]
            return {GEN_AI_INPUT_MESSAGES: _dumps(messages)} if messages else {}
        out: dict[str, Any] = {}
        given = _given(kwargs.get("input"))
        if given is not None:
            out[GEN_AI_INPUT_MESSAGES] = _dumps(parts.responses_input_messages(given))
        instructions = _given(kwargs.get("instructions"))
        if isinstance(instructions, str) and instructions:
            out[GEN_AI_SYSTEM_INSTRUCTIONS] = _dumps([{"type": "text", "content": instructions}])
        return out

    # -------------------------------------------------------------- results

    def finish(self, result: Any) -> Any:
        """Record a complete result and end the span; a stream is wrapped and ends the span when done; a
        raw response is wrapped and finishes the span when its body is parsed (or it is closed)."""
        if _is_raw_response(result):
            return _raw_response_class()(result, self)
        if self.kwargs.get("stream") is True and _is_stream(result):
            return _StreamTap(result, self)
        try:
            self._record(result)
        except Exception:  # never break the user's call because of tracing
            logger.exception("agl openai instrumentation: recording a %s result failed", self.operation)
        self.span.end()
        return result

    def fail(self, error: BaseException) -> None:
        """End the span as failed."""
        self.span.set_attribute("error.type", type(error).__qualname__)
        self.span.set_status(Status(StatusCode.ERROR, str(error)))
        self.span.end()

    def _set(self, attributes: Mapping[str, Any]) -> None:
        self.span.set_attributes({k: v for k, v in attributes.items() if v is not None})

    def _record(self, response: Any) -> None:
        if self.operation == GEN_AI_OPERATION_RESPONSES:
            self._record_responses(parts.plain(response))
            return
        usage = getattr(response, "usage", None)
        choices = getattr(response, "choices", None) or []
        self._set(
            {
                GEN_AI_RESPONSE_ID: getattr(response, "id", None),
                GEN_AI_RESPONSE_MODEL: getattr(response, "model", None),
                GEN_AI_RESPONSE_FINISH_REASONS: [c.finish_reason or "error" for c in choices] or None,
                GEN_AI_USAGE_INPUT_TOKENS: getattr(usage, "prompt_tokens", None),
                GEN_AI_USAGE_OUTPUT_TOKENS: getattr(usage, "completion_tokens", None),
                **response_attributes(response),
            }
        )
        if self.capture:
            if self.operation == GEN_AI_OPERATION_CHAT:
                output = parts.chat_output_messages(choices)
            else:
                output = [
                    parts.text_message("assistant", c.text or "", c.finish_reason or "error") for c in choices
                ]
            self._set({GEN_AI_OUTPUT_MESSAGES: _dumps(output)})

    def _record_responses(self, response: Mapping[str, Any]) -> None:
        usage = response.get("usage") or {}
        self._set(
            {
                GEN_AI_RESPONSE_ID: response.get("id"),
                GEN_AI_RESPONSE_MODEL: response.get("model"),
                GEN_AI_RESPONSE_FINISH_REASONS: [parts.responses_finish_reason(response)],
                GEN_AI_USAGE_INPUT_TOKENS: usage.get("input_tokens"),
                GEN_AI_USAGE_OUTPUT_TOKENS: usage.get("output_tokens"),
                **responses_api_attributes(response),
            }
        )
        if self.capture:
            self._set({GEN_AI_OUTPUT_MESSAGES: _dumps(parts.responses_output_messages(response))})

    def finish_stream(self, tap: _StreamTap, error: BaseException | None) -> None:
        """End the span of a streamed call with what the stream delivered."""
        try:
            if self.operation == GEN_AI_OPERATION_RESPONSES:
                if tap.final_response is not None:
                    self._record_responses(tap.final_response)
            else:
                self._record_stream(tap.accumulator)
        except Exception:
            logger.exception("agl openai instrumentation: recording a streamed %s failed", self.operation)
        if error is not None:
            self.fail(error)
        else:
            self.span.end()

    def _record_stream(self, acc: StreamAccumulator) -> None:
        usage = acc.usage
        self._set(
            {
                GEN_AI_RESPONSE_ID: acc.id,
                GEN_AI_RESPONSE_MODEL: acc.model,
                GEN_AI_USAGE_INPUT_TOKENS: getattr(usage, "prompt_tokens", None),
                GEN_AI_USAGE_OUTPUT_TOKENS: getattr(usage, "completion_tokens", None),
                **acc.attributes(),
            }
        )
        if self.capture:
            self._set({GEN_AI_OUTPUT_MESSAGES: _dumps(acc.output_messages())})


@functools.cache
def _raw_response_class() -> type:
    """The raw-response proxy class (built on first use: ``wrapt`` is an optional dependency)."""
    import wrapt

    class RawResponse(wrapt.ObjectProxy):  # type: ignore[type-arg]
        """A raw ``APIResponse`` / ``AsyncAPIResponse`` / ``LegacyAPIResponse`` (still an instance of its
        class) whose ``parse()`` -- sync, or awaited for async clients -- records the body on the span."""

        def __init__(self, raw: Any, call: _Call) -> None:
            super().__init__(raw)
            self._self_call = call
            self._self_done = False

        def _self_finish(self, parsed: Any) -> Any:
            if self._self_done:
                return parsed
            self._self_done = True
            return self._self_call.finish(parsed)

        def parse(self, *args: Any, **kwargs: Any) -> Any:
            """The parsed body, recorded on the span (a stream is tapped and recorded when it ends)."""
            parsed = self.__wrapped__.parse(*args, **kwargs)
            if inspect.isawaitable(parsed):
                return self._self_finish_async(parsed)
            return self._self_finish(parsed)

        async def _self_finish_async(self, pending: Any) -> Any:
            try:
                parsed = await pending
            except BaseException as exc:
                if not self._self_done:
                    self._self_done = True
                    self._self_call.fail(exc)
                raise
            return self._self_finish(parsed)

        def close(self) -> Any:
            """Close the response; a body never parsed ends the span without a result."""
            if not self._self_done:
                self._self_done = True
                self._self_call.span.end()
            return self.__wrapped__.close()

    return RawResponse


class _StreamTap:
    """Proxy of an ``openai`` Stream/AsyncStream: folds events in and ends the call's span once, when the
    stream is exhausted, fails or is closed."""

    def __init__(self, stream: Any, call: _Call) -> None:
        self._stream = stream
        self._call = call
        self.accumulator = StreamAccumulator()
        self.final_response: Mapping[str, Any] | None = None
        self._done = False

    def _add(self, event: Any) -> None:
        if self._call.operation != GEN_AI_OPERATION_RESPONSES:
            self.accumulator.add(event)
        elif getattr(event, "type", None) in ("response.completed", "response.incomplete", "response.failed"):
            self.final_response = parts.plain(getattr(event, "response", None))

    def _finish(self, error: BaseException | None = None) -> None:
        if not self._done:
            self._done = True
            self._call.finish_stream(self, error)

    def __iter__(self) -> _StreamTap:
        return self

    def __next__(self) -> Any:
        try:
            event = next(self._stream)
        except StopIteration:
            self._finish()
            raise
        except Exception as exc:
            self._finish(exc)
            raise
        self._add(event)
        return event

    def __aiter__(self) -> _StreamTap:
        return self

    async def __anext__(self) -> Any:
        try:
            event = await self._stream.__anext__()
        except StopAsyncIteration:
            self._finish()
            raise
        except Exception as exc:
            self._finish(exc)
            raise
        self._add(event)
        return event

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


# ------------------------------------------------------------------------------------ wrappers


def _start(operation: str, instance: Any, kwargs: Mapping[str, Any]) -> _Call | None:
    """A traced call, or None when this call is not traced (nested in one, or no agl trace active)."""
    if _IN_CALL.get() or _state.tracer is None:
        return None
    call = _Call(operation, instance, kwargs)
    if not call.span.is_recording():
        call.span.end()
        return None
    return call


def _make_wrappers(operation: str) -> tuple[Callable[..., Any], Callable[..., Any]]:
    def sync_wrapper(
        wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        call = _start(operation, instance, kwargs)
        if call is None:
            return wrapped(*args, **kwargs)
        token = _IN_CALL.set(True)
        try:
            with trace_api.use_span(call.span, end_on_exit=False, record_exception=False):
                result = wrapped(*args, **kwargs)
        except BaseException as exc:
            call.fail(exc)
            raise
        finally:
            _IN_CALL.reset(token)
        return call.finish(result)

    async def async_wrapper(
        wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        call = _start(operation, instance, kwargs)
        if call is None:
            return await wrapped(*args, **kwargs)
        token = _IN_CALL.set(True)
        try:
            with trace_api.use_span(call.span, end_on_exit=False, record_exception=False):
                result = await wrapped(*args, **kwargs)
        except BaseException as exc:
            call.fail(exc)
            raise
        finally:
            _IN_CALL.reset(token)
        return call.finish(result)

    return sync_wrapper, async_wrapper


# ------------------------------------------------------------------------------------ install


def _import_requirements() -> Any:
    try:
        import openai  # noqa: F401
        import wrapt
    except ImportError as exc:
        raise ImportError(
            f"Tracing openai calls needs packages that are missing ({exc}); {_MISSING_HELP}."
        ) from exc
    return wrapt


def _wrap_all(wrapt: Any) -> None:
    import importlib

    for module_name, class_name, method, operation in _TARGETS:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            logger.debug("openai has no %s; its calls are not traced.", module_name)
            continue
        cls = getattr(module, class_name, None)
        if cls is None or not callable(getattr(cls, method, None)):
            continue
        sync_wrapper, async_wrapper = _make_wrappers(operation)
        wrapper = async_wrapper if class_name.startswith("Async") else sync_wrapper
        wrapt.wrap_function_wrapper(cls, method, wrapper)
        _state.wrappers.append((cls, method, wrapper))


def _unwrap_all() -> None:
    for cls, method, wrapper in reversed(_state.wrappers):
        current = cls.__dict__.get(method)
        if getattr(current, "_self_wrapper", None) is wrapper:
            setattr(cls, method, current.__wrapped__)
        else:
            logger.warning(
                "%s.%s was re-wrapped by someone else; leaving agl's wrapper in place.", cls, method
            )
    _state.wrappers.clear()


def is_openai_instrumented() -> bool:
    """Whether :func:`instrument_openai` is in effect."""
    return _state.users > 0


def instrument_openai(tracer_provider: trace_api.TracerProvider | None = None) -> None:
    """Trace ``openai`` chat completions, text completions and Responses calls as GenAI spans with token ids.

    ``tracer_provider`` defaults to agl's active-tracer provider (spans go to the tracer active where
    the call is made; nothing is recorded outside a trace). Calls nest: each needs one
    :func:`uninstrument_openai`; the first call's provider is kept. Raises ``ImportError`` naming the
    missing packages when the ``openai`` extra is not installed.
    """
    wrapt = _import_requirements()
    with _state.lock:
        if _state.users > 0:
            _state.users += 1
            if tracer_provider is not None and tracer_provider is not _state.provider:
                logger.warning(
                    "openai is already instrumented by agl with another provider; keeping that one."
                )
            return
        if tracer_provider is None:
            from agl_core.tracer.routing import active_tracer_provider

            tracer_provider = active_tracer_provider
        from agl_core import __version__

        _state.tracer = tracer_provider.get_tracer(_SCOPE, __version__)
        _wrap_all(wrapt)
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
        _unwrap_all()
        _state.tracer = None
        _state.provider = None
