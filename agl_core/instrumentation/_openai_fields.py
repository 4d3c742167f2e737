"""Reading agl's extra LLM-span fields (token ids, logprobs, tools) from ``openai`` requests and responses.

Servers return token ids in vLLM's ``return_token_ids`` format: ``prompt_token_ids`` at the top level
(chat) or per choice (completions), ``token_ids`` per choice; streamed chunks carry the delta's
``token_ids`` and the first chunk the ``prompt_token_ids``. Responses API results carry top-level
``prompt_token_ids`` and ``token_ids`` (in streams, on the ``response.completed`` event's response). The
``openai`` client keeps these unknown fields in ``model_extra``. Older producers are accepted too: a
top-level ``response_token_ids`` list of lists and LiteLLM's ``provider_specific_fields["token_ids"]``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from agl_core.instrumentation._genai_parts import tool_definitions
from agl_core.semconv import (
    AGL_LLM_SOURCE,
    GEN_AI_RESPONSE_FINISH_REASONS,
    GEN_AI_TOOL_DEFINITIONS,
    LLM_SOURCE_TRACER,
    LOGPROBS_CONTENT,
    PROMPT_TOKEN_IDS,
    RESPONSE_TOKEN_IDS,
)

__all__ = ["StreamAccumulator", "request_attributes", "response_attributes", "responses_api_attributes"]


def _extra(obj: Any, key: str) -> Any:
    """A field of an openai model that may live in ``model_extra`` (or a dict key)."""
    if obj is None:
        return None
    if isinstance(obj, Mapping):
        return obj.get(key)
    extra = getattr(obj, "model_extra", None)
    if isinstance(extra, dict) and key in extra:
        return extra[key]
    return getattr(obj, key, None)


def _int_list(value: Any) -> list[int] | None:
    if isinstance(value, (list, tuple)) and all(type(item) is int for item in value):
        return list(value)
    return None


def _jsonable(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json", exclude_none=True)
    return str(value)


def _given(value: Any) -> Any:
    """None for openai's NOT_GIVEN / Omit sentinels."""
    return None if value is None or type(value).__name__ in ("NotGiven", "Omit") else value


def request_attributes(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """Attributes known from the request: capture source, the tools (``gen_ai.tool.definitions``), token-id
    prompts."""
    attributes: dict[str, Any] = {AGL_LLM_SOURCE: LLM_SOURCE_TRACER}
    tools = _given(kwargs.get("tools"))
    if tools:
        attributes[GEN_AI_TOOL_DEFINITIONS] = json.dumps(tool_definitions(tools), default=_jsonable)
    prompt_ids = _int_list(_given(kwargs.get("prompt")))
    if prompt_ids:
        attributes[PROMPT_TOKEN_IDS] = prompt_ids
    return attributes


def _choice_token_ids(choice: Any) -> list[int] | None:
    ids = _int_list(_extra(choice, "token_ids"))
    if ids is None:
        specific = _extra(choice, "provider_specific_fields")
        if isinstance(specific, Mapping):
            ids = _int_list(specific.get("token_ids"))
    return ids


def _logprob_entries(logprobs: Any) -> list[Any] | None:
    """A choice's logprobs as a chat-style ``content`` list (completions' parallel lists are converted)."""
    if logprobs is None:
        return None
    content = _extra(logprobs, "content")
    if isinstance(content, list):
        return [_jsonable(entry) if not isinstance(entry, Mapping) else dict(entry) for entry in content]
    tokens, values = _extra(logprobs, "tokens"), _extra(logprobs, "token_logprobs")
    if isinstance(tokens, list) and isinstance(values, list):
        tops = _extra(logprobs, "top_logprobs") or [None] * len(tokens)
        entries = []
        for token, value, top in zip(tokens, values, tops, strict=False):
            entry: dict[str, Any] = {"token": token, "logprob": value}
            if isinstance(top, Mapping):
                entry["top_logprobs"] = [{"token": k, "logprob": v} for k, v in top.items()]
            entries.append(entry)
        return entries
    return None


def response_attributes(response: Any) -> dict[str, Any]:
    """agl's attributes from a complete (non-streamed) chat or completions response; first choice only."""
    attributes: dict[str, Any] = {}
    choices = getattr(response, "choices", None) or []
    first = choices[0] if choices else None
    prompt_ids = _int_list(_extra(response, "prompt_token_ids")) or _int_list(
        _extra(first, "prompt_token_ids")
    )
    if prompt_ids is not None:
        attributes[PROMPT_TOKEN_IDS] = prompt_ids
    response_ids = _choice_token_ids(first)
    if response_ids is None:
        nested = _extra(response, "response_token_ids")
        if isinstance(nested, list) and nested:
            response_ids = _int_list(nested[0])
    if response_ids is not None:
        attributes[RESPONSE_TOKEN_IDS] = response_ids
    entries = _logprob_entries(getattr(first, "logprobs", None))
    if entries is not None:
        attributes[LOGPROBS_CONTENT] = json.dumps(entries)
    return attributes


def responses_api_attributes(response: Mapping[str, Any]) -> dict[str, Any]:
    """agl's attributes from a Responses API result (as a plain dict): token ids and output logprobs."""
    attributes: dict[str, Any] = {}
    prompt_ids = _int_list(response.get("prompt_token_ids"))
    if prompt_ids is not None:
        attributes[PROMPT_TOKEN_IDS] = prompt_ids
    response_ids = _int_list(response.get("token_ids"))
    if response_ids is None:
        response_ids = _int_list(response.get("response_token_ids"))
    if response_ids is not None:
        attributes[RESPONSE_TOKEN_IDS] = response_ids
    entries: list[Any] = []
    for item in response.get("output") or []:
        for part in item.get("content") or [] if isinstance(item, Mapping) else []:
            if isinstance(part, Mapping) and isinstance(part.get("logprobs"), list):
                entries.extend(part["logprobs"])
    if entries:
        attributes[LOGPROBS_CONTENT] = json.dumps(entries)
    return attributes


class StreamAccumulator:
    """Collects agl's fields over the chunks of a streamed response (token ids of choice 0 concatenated)."""

    def __init__(self) -> None:
        self.prompt_token_ids: list[int] | None = None
        self.response_token_ids: list[int] = []
        self.saw_token_ids = False
        self.logprobs: list[Any] = []
        self.saw_logprobs = False
        self.finish_reasons: dict[int, str] = {}
        self.texts: dict[int, list[str]] = {}
        self.model: str | None = None
        self.id: str | None = None
        self.usage: Any = None
        self.roles: dict[int, str] = {}
        self.tool_calls: dict[int, dict[int, dict[str, Any]]] = {}

    def add(self, chunk: Any) -> None:
        """Fold one chunk in."""
        self.model = self.model or getattr(chunk, "model", None)
        self.id = self.id or getattr(chunk, "id", None)
        if getattr(chunk, "usage", None) is not None:
            self.usage = chunk.usage
        if self.prompt_token_ids is None:
            self.prompt_token_ids = _int_list(_extra(chunk, "prompt_token_ids"))
        for choice in getattr(chunk, "choices", None) or []:
            index = getattr(choice, "index", 0) or 0
            if getattr(choice, "finish_reason", None):
                self.finish_reasons[index] = choice.finish_reason
            text = getattr(choice, "text", None)
            delta = getattr(choice, "delta", None)
            if delta is not None:
                text = getattr(delta, "content", None)
                if getattr(delta, "role", None):
                    self.roles[index] = delta.role
                for call in getattr(delta, "tool_calls", None) or []:
                    slot = self.tool_calls.setdefault(index, {}).setdefault(
                        getattr(call, "index", 0) or 0, {"id": None, "name": None, "arguments": ""}
                    )
                    slot["id"] = slot["id"] or getattr(call, "id", None)
                    function = getattr(call, "function", None)
                    if function is not None:
                        slot["name"] = slot["name"] or getattr(function, "name", None)
                        slot["arguments"] += getattr(function, "arguments", None) or ""
            if isinstance(text, str):
                self.texts.setdefault(index, []).append(text)
            if index != 0:
                continue
            if self.prompt_token_ids is None:
                self.prompt_token_ids = _int_list(_extra(choice, "prompt_token_ids"))
            ids = _choice_token_ids(choice)
            if ids is not None:
                self.saw_token_ids = True
                self.response_token_ids.extend(ids)
            entries = _logprob_entries(getattr(choice, "logprobs", None))
            if entries is not None:
                self.saw_logprobs = True
                self.logprobs.extend(entries)

    def output_messages(self) -> list[dict[str, Any]]:
        """The streamed choices as GenAI output messages (text and tool calls, per choice index)."""
        from agl_core.instrumentation._genai_parts import _arguments

        messages: list[dict[str, Any]] = []
        for index in sorted(set(self.texts) | set(self.tool_calls) | set(self.finish_reasons)):
            text = "".join(self.texts.get(index, []))
            parts: list[dict[str, Any]] = [{"type": "text", "content": text}] if text else []
            for _, call in sorted(self.tool_calls.get(index, {}).items()):
                parts.append(
                    {
                        "type": "tool_call",
                        "id": call["id"],
                        "name": call["name"],
                        "arguments": _arguments(call["arguments"]),
                    }
                )
            role = self.roles.get(index, "assistant")
            messages.append({"role": role, "parts": parts, "finish_reason": self.finish_reasons.get(index)})
        return messages

    def attributes(self) -> dict[str, Any]:
        """agl's attributes for what was streamed so far."""
        attributes: dict[str, Any] = {}
        if self.prompt_token_ids is not None:
            attributes[PROMPT_TOKEN_IDS] = self.prompt_token_ids
        if self.saw_token_ids:
            attributes[RESPONSE_TOKEN_IDS] = self.response_token_ids
        if self.saw_logprobs:
            attributes[LOGPROBS_CONTENT] = json.dumps(self.logprobs)
        if self.finish_reasons:
            attributes[GEN_AI_RESPONSE_FINISH_REASONS] = [
                self.finish_reasons[index] for index in sorted(self.finish_reasons)
            ]
        return attributes
