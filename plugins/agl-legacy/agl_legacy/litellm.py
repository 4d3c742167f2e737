"""Agent Lightning 0.3's ``agentlightning.instrumentation.litellm``.

Served at ``agl_core.instrumentation.litellm``; listed in docs/migrating-from-agent-lightning.md. For
applications that call LiteLLM directly with its OpenTelemetry callback: `instrument_litellm` makes that
callback also record ``prompt_token_ids`` and ``response_token_ids`` (from a vLLM backend's response) on
its spans, the attributes agl's adapters read. agl's own LLM proxy does not use LiteLLM and records token
ids without this. Needs ``pip install litellm``.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

from agl_core._compat import import_required

__all__ = ["instrument_litellm", "uninstrument_litellm"]

_lock = threading.Lock()
_original_set_attributes: Callable[..., Any] | None = None


def _otel_callback_class(public_name: str) -> Any:
    return import_required("litellm.integrations.opentelemetry", public_name, "litellm").OpenTelemetry


def _field(response: Any, name: str) -> Any:
    getter = getattr(response, "get", None)
    return getter(name) if callable(getter) else getattr(response, name, None)


def _with_token_ids(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def set_attributes(self: Any, span: Any, kwargs: Any, response_obj: Any | None) -> Any:
        result = original(self, span, kwargs, response_obj)
        if response_obj is not None:
            prompt_ids = _field(response_obj, "prompt_token_ids")
            if prompt_ids:
                span.set_attribute("prompt_token_ids", list(prompt_ids))
            response_ids = _field(response_obj, "response_token_ids")
            if response_ids:
                span.set_attribute("response_token_ids", list(response_ids[0]))
        return result

    return set_attributes


def instrument_litellm() -> None:
    """Record token ids on LiteLLM's OpenTelemetry spans; idempotent."""
    global _original_set_attributes
    callback = _otel_callback_class("instrument_litellm")
    with _lock:
        if _original_set_attributes is None:
            _original_set_attributes = callback.set_attributes
            callback.set_attributes = _with_token_ids(callback.set_attributes)


def uninstrument_litellm() -> None:
    """Undo `instrument_litellm` (a no-op if it is not applied)."""
    global _original_set_attributes
    with _lock:
        if _original_set_attributes is not None:
            _otel_callback_class("uninstrument_litellm").set_attributes = _original_set_attributes
            _original_set_attributes = None
