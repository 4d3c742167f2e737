"""The one normalisation layer for LLM-call spans: every widespread shape, read into one view.

Whoever recorded an LLM call -- agl's tracer or LLM proxy, Agent Lightning 0.3, or any OpenTelemetry
instrumentation a framework ships -- :func:`read_llm_call` gives the same :class:`LlmCall`: prompt and
completion as OpenAI chat messages (``{"role", "content", "tool_calls"?, "tool_call_id"?}``), tools in
OpenAI format, usage, model, response id, token ids and logprobs. ``TracerTraceToTriplet``,
``LlmProxyTraceToTriplet``, ``TraceToMessages`` and ``agl doctor`` all read spans through it.

Shapes read (:data:`LlmShape`), first match wins per field:

* ``otel-genai`` -- current OpenTelemetry GenAI conventions: ``gen_ai.input.messages`` /
  ``gen_ai.output.messages`` / ``gen_ai.system_instructions`` (JSON, "parts" format),
  ``gen_ai.tool.definitions``, ``gen_ai.usage.*``, ``gen_ai.response.id``; agl writes these.
* ``otel-genai-events`` -- earlier GenAI forms carried as span events: ``gen_ai.content.prompt`` /
  ``gen_ai.content.completion`` (attributes ``gen_ai.prompt`` / ``gen_ai.completion``), per-message
  ``gen_ai.{system,user,assistant,tool}.message`` and ``gen_ai.choice`` events, and events carrying
  ``gen_ai.input.messages`` / ``gen_ai.output.messages``.
* ``openllmetry`` -- flattened ``gen_ai.prompt.<i>.*`` / ``gen_ai.completion.<i>.*``,
  ``llm.request.functions.<i>.*``, ``gen_ai.usage.prompt_tokens`` (OpenLLMetry/Traceloop, AgentOps).
* ``openinference`` -- ``llm.input_messages.<i>.message.*`` / ``llm.output_messages.<i>.message.*``
  (``contents``, ``tool_calls``), ``llm.tools.<i>.tool.json_schema``, ``llm.token_count.*``,
  ``llm.model_name`` (Arize OpenInference). A span of kind ``LLM`` with only OpenInference's generic keys
  (input, output, model name, parameters) and no messages, prompts or token counts is no call: an LLM
  class's helper methods are traced as ``LLM`` spans too.
* ``agentlightning`` -- Agent Lightning 0.3's ``agentlightning.operation.*`` and vLLM fields.

A span agl cannot read is kept as it is (never dropped); :func:`unread_keys` lists what it carried so
``agl doctor`` can name it.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from agl_core.semconv import (
    AGL_LLM_SOURCE,
    GEN_AI_INPUT_MESSAGES,
    GEN_AI_OPERATION_NAME,
    GEN_AI_OUTPUT_MESSAGES,
    GEN_AI_REQUEST_TOOLS,
    GEN_AI_RESPONSE_ID,
    GEN_AI_TOOL_DEFINITIONS,
    LLM_SOURCE_PROXY,
    LOGPROBS_CONTENT,
    PROMPT_TOKEN_IDS,
    RESPONSE_TOKEN_IDS,
)
from agl_core.types import Span
from agl_core.utils.otel import filter_and_unflatten_attributes, unflatten_attributes

__all__ = [
    "AGENT_NAME",
    "LLM_SOURCE",
    "PROXY_SPAN_NAME",
    "LlmCall",
    "LlmShape",
    "Usage",
    "compat_span_name",
    "completion_messages",
    "image_urls",
    "is_llm_span",
    "is_proxy_llm_span",
    "llm_call_pattern",
    "llm_shape",
    "logprobs",
    "model",
    "normalize_role",
    "prompt_messages",
    "prompt_token_ids",
    "read_llm_call",
    "request_tools",
    "response_id",
    "response_token_ids",
    "unflatten_prefix",
    "unread_keys",
    "usage",
]

LLM_SOURCE = AGL_LLM_SOURCE
"""Attribute naming who recorded an LLM call: ``"tracer"`` or ``"proxy"``."""
PROXY_SPAN_NAME = "agl.llm_proxy.request"
"""Name of the span the agl LLM proxy records per request."""
AGENT_NAME = "gen_ai.agent.name"
"""OpenTelemetry GenAI attribute naming the agent a span belongs to."""

_PROMPT_IDS_KEYS = (PROMPT_TOKEN_IDS, "agentlightning.operation.output.prompt_token_ids")
_RESPONSE_IDS_KEYS = (
    RESPONSE_TOKEN_IDS,
    "agentlightning.operation.output.response_token_ids.0",
    "agentlightning.operation.output.choices.0.token_ids",
    "agentlightning.operation.output.choices.0.provider_specific_fields.token_ids",
)
_RESPONSE_ID_KEYS = (GEN_AI_RESPONSE_ID, "agentlightning.operation.output.id", "llm.hosted_vllm.id")
_IMAGE_PART_TYPES = ("image_url", "input_image", "image")
_PROMPT_KEYS = (
    GEN_AI_INPUT_MESSAGES,
    "gen_ai.prompt",
    "llm.input_messages",
    "agentlightning.operation.input.messages",
)
_COMPLETION_KEYS = (
    GEN_AI_OUTPUT_MESSAGES,
    "gen_ai.completion",
    "llm.output_messages",
    "agentlightning.operation.output.choices",
)
_TOOLS_KEYS = (
    GEN_AI_TOOL_DEFINITIONS,
    GEN_AI_REQUEST_TOOLS,
    "gen_ai.request.functions",
    "llm.request.functions",
    "llm.tools",
)


def _where(span: Span, key: str) -> str:
    return f"span {span.name!r} ({span.span_id}), attribute {key!r}"


def unflatten_prefix(attributes: Mapping[str, Any], prefix: str) -> Any:
    """The value under ``prefix``: the attribute itself or its ``prefix.*`` keys rebuilt; None if absent."""
    if prefix in attributes:
        return attributes[prefix]
    dotted = prefix + "."
    if not any(key.startswith(dotted) for key in attributes):
        return None
    return filter_and_unflatten_attributes(dict(attributes), prefix)


def _as_token_ids(value: Any) -> list[int] | None:
    """A list of ints from a list attribute, a JSON string or a Python literal string; None if not ids."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            try:
                value = ast.literal_eval(value)
            except (ValueError, SyntaxError):
                return None
        if isinstance(value, list) and len(value) == 1 and isinstance(value[0], list):
            value = value[0]  # ``response_token_ids`` of one choice stored as a nested list
    if isinstance(value, (list, tuple)) and all(
        isinstance(t, int) and not isinstance(t, bool) for t in value
    ):
        return list(value)
    return None


def _first_ids(span: Span, keys: tuple[str, ...]) -> list[int] | None:
    for key in keys:
        if key in span.attributes:
            ids = _as_token_ids(span.attributes[key])
            if ids is not None:
                return ids
    return None


def prompt_token_ids(span: Span) -> list[int] | None:
    """The prompt token ids the server returned for this call, or None when the span has none."""
    ids = _first_ids(span, _PROMPT_IDS_KEYS)
    if ids is None and "llm.hosted_vllm.prompt_token_ids" in span.attributes:
        ids = _as_token_ids(span.attributes["llm.hosted_vllm.prompt_token_ids"])
    return ids


def response_token_ids(span: Span) -> list[int] | None:
    """The response token ids of the first choice, or None when the span has none."""
    ids = _first_ids(span, _RESPONSE_IDS_KEYS)
    if ids is None:
        ids = _first_ids(span, ("llm.hosted_vllm.response_token_ids", "llm.hosted_vllm.response_token_ids.0"))
    if ids is None:
        ids = _first_ids(span, ("llm.hosted_vllm.choices.0.token_ids",))
    return ids


def response_id(span: Span) -> str | None:
    """The provider's response id (``gen_ai.response.id`` and fallbacks), or None."""
    attributes = span.attributes
    for key in _RESPONSE_ID_KEYS:
        value = attributes.get(key)
        if isinstance(value, str) and value:
            return value
    if attributes.get("openinference.span.kind") == "LLM" and attributes.get("output.mime_type") == (
        "application/json"
    ):
        output = attributes.get("output.value")  # OpenInference keeps the raw response body here
        if isinstance(output, str) and output.startswith("{"):
            try:
                decoded = json.loads(output)
            except ValueError:
                return None
            value = decoded.get("id") if isinstance(decoded, dict) else None
            return value if isinstance(value, str) and value else None
    return None


def logprobs(span: Span) -> Any:
    """The decoded ``logprobs.content`` attribute (OpenAI per-token entries), or None."""
    value = span.attributes.get(LOGPROBS_CONTENT)
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return None
    return value


def is_proxy_llm_span(span: Span) -> bool:
    """Whether the agl LLM proxy (or Agent Lightning 0.3's LiteLLM proxy) recorded this span."""
    return (
        span.attributes.get(LLM_SOURCE) == LLM_SOURCE_PROXY
        or span.name == PROXY_SPAN_NAME
        or span.name in ("raw_gen_ai_request", "litellm_request")
    )


# ---------------------------------------------------------------------------- messages


def _loads(value: Any, span: Span, key: str, strict: bool) -> Any:
    """Decode a JSON attribute; bad JSON raises ``ValueError`` when strict, else returns the raw string."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError as exc:
        if strict:
            raise ValueError(
                f"{_where(span, key)} is not valid JSON ({exc}); fix the instrumentation"
            ) from None
        return value


_CHAT_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
_ROLE_ALIASES = {
    "human": "user",
    "ai": "assistant",
    "model": "assistant",
    "bot": "assistant",
    "chatbot": "assistant",
    "tool-call": "assistant",
    "tool_call": "assistant",
    "tool-response": "tool",
    "tool_response": "tool",
    "ipython": "tool",
}


def normalize_role(role: Any, default: str = "user") -> str:
    """A chat role as OpenAI spells it: an enum or its repr (``MessageRole.SYSTEM``) becomes its value
    (``system``), case is folded and other frameworks' names are mapped (``human`` -> ``user``,
    ``model``/``ai`` -> ``assistant``, ``tool-response`` -> ``tool``). Unknown roles are kept (lower case)."""
    if type(role) is str and role in _CHAT_ROLES:  # the usual case: already a plain chat role
        return role
    value = getattr(role, "value", role)
    if value is None or value == "":
        return default
    text = str(value).strip()
    if "." in text and not text.startswith("."):  # "MessageRole.SYSTEM", "Role.user"
        text = text.rsplit(".", 1)[1]
    text = text.lower()
    return _ROLE_ALIASES.get(text, text)


def _arguments_json(arguments: Any) -> str:
    if arguments is None:
        return "{}"
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def _image_part(part: Mapping[str, Any]) -> dict[str, Any] | None:
    """An OpenAI ``image_url`` part for an image in any accepted shape, or None if ``part`` is not one."""
    kind = part.get("type")
    if kind in _IMAGE_PART_TYPES:
        url = part.get("image_url", part.get("url"))
        if isinstance(url, Mapping):
            url = url.get("url")
        return {"type": "image_url", "image_url": {"url": url}} if isinstance(url, str) else None
    if part.get("modality") == "image" and kind == "uri" and isinstance(part.get("uri"), str):
        return {"type": "image_url", "image_url": {"url": part["uri"]}}
    if part.get("modality") == "image" and kind == "blob" and isinstance(part.get("content"), str):
        mime = part.get("mime_type") or "image/png"
        return {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{part['content']}"}}
    return None


def _content(parts: list[dict[str, Any]]) -> str | list[dict[str, Any]] | None:
    """OpenAI message content: a string when every part is text, else the part list."""
    if not parts:
        return None
    if all(part["type"] == "text" for part in parts):
        return "".join(part["text"] for part in parts)
    return parts


def _gemini_part(part: Mapping[str, Any]) -> Mapping[str, Any]:
    """A Gemini ``Part`` (``text`` / ``function_call`` / ``function_response``, as google-genai dumps it)
    as a GenAI part; any other part is returned as it is."""
    if "type" in part:
        return part
    call = part.get("function_call")
    if isinstance(call, Mapping):
        return {
            "type": "tool_call",
            "id": call.get("id"),
            "name": call.get("name"),
            "arguments": call.get("args"),
        }
    response = part.get("function_response")
    if isinstance(response, Mapping):
        return {"type": "tool_call_response", "id": response.get("id"), "response": response.get("response")}
    if isinstance(part.get("text"), str) and not part.get("thought"):
        return {"type": "text", "content": part["text"]}
    return part


def _from_genai(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """OpenAI messages for one GenAI "parts" message, or a Gemini ``Content`` (tool responses become
    ``tool`` messages)."""
    role = normalize_role(message.get("role"))
    content: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    tool_messages: list[dict[str, Any]] = []
    for part in message.get("parts") or []:
        if not isinstance(part, Mapping):
            continue
        part = _gemini_part(part)
        kind = part.get("type")
        if kind == "text":
            content.append({"type": "text", "text": str(part.get("content", ""))})
        elif kind == "tool_call":
            function = {"name": part.get("name"), "arguments": _arguments_json(part.get("arguments"))}
            calls.append({"id": part.get("id"), "type": "function", "function": function})
        elif kind == "tool_call_response":
            response = part.get("response")
            text = response if isinstance(response, str) else json.dumps(response)
            tool_messages.append({"role": "tool", "tool_call_id": part.get("id"), "content": text})
        elif (image := _image_part(part)) is not None:
            content.append(image)
    out = list(tool_messages)
    if content or calls or not tool_messages:
        converted: dict[str, Any] = {"role": role, "content": _content(content)}
        if calls:
            converted["tool_calls"] = calls
        out.append(converted)
    return out


def _legacy_content(content: Any) -> Any:
    """Content of an Agent Lightning 0.3 message: JSON-encoded part lists are decoded."""
    if isinstance(content, str) and content.startswith("["):
        try:
            decoded = json.loads(content)
        except ValueError:
            return content
        if isinstance(decoded, list) and all(isinstance(p, Mapping) and "type" in p for p in decoded):
            return [_image_part(p) or dict(p) for p in decoded]
    if isinstance(content, list):
        return [_image_part(p) or dict(p) if isinstance(p, Mapping) else p for p in content]
    return content


def _legacy_tool_call(call: Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(call.get("function"), Mapping):
        function = dict(call["function"])
        function["arguments"] = _arguments_json(function.get("arguments"))
    else:
        function = {"name": call.get("name"), "arguments": _arguments_json(call.get("arguments"))}
    return {"id": call.get("id"), "type": call.get("type") or "function", "function": function}


def _from_openai_like(message: Mapping[str, Any]) -> dict[str, Any]:
    """Normalize an OpenAI-style (Agent Lightning 0.3) message dict."""
    out: dict[str, Any] = {"role": normalize_role(message.get("role"))}
    content = message.get("content")
    out["content"] = _legacy_content(content) if content is not None else None
    tool_calls = message.get("tool_calls")
    if isinstance(tool_calls, list) and tool_calls:
        out["tool_calls"] = [_legacy_tool_call(call) for call in tool_calls if isinstance(call, Mapping)]
    if message.get("tool_call_id") is not None:
        out["tool_call_id"] = message["tool_call_id"]
    return out


def _openinference_content(contents: Any) -> list[dict[str, Any]]:
    """OpenAI content parts of OpenInference ``message.contents`` (``message_content`` text / image)."""
    parts: list[dict[str, Any]] = []
    for item in contents if isinstance(contents, list) else []:
        content = item.get("message_content") if isinstance(item, Mapping) else None
        if not isinstance(content, Mapping):
            continue
        if content.get("type", "text") == "text" and isinstance(content.get("text"), str):
            parts.append({"type": "text", "text": content["text"]})
        image = content.get("image")
        url = image.get("image", {}).get("url") if isinstance(image, Mapping) else None
        if isinstance(url, str):
            parts.append({"type": "image_url", "image_url": {"url": url}})
    return parts


def _from_openinference(message: Mapping[str, Any]) -> dict[str, Any]:
    """An OpenInference ``message`` object (``role``, ``content``/``contents``, ``tool_calls``) as OpenAI."""
    out: dict[str, Any] = {key: message[key] for key in ("role", "tool_call_id", "name") if key in message}
    if "content" in message:
        out["content"] = message["content"]
    elif "contents" in message:
        parts = _openinference_content(message["contents"])
        out["content"] = _content(parts) if parts else None
    calls = []
    for call in message.get("tool_calls") or []:
        if isinstance(call, Mapping):
            calls.append(
                dict(call["tool_call"]) if isinstance(call.get("tool_call"), Mapping) else dict(call)
            )
    if calls:
        out["tool_calls"] = calls
    converted = _from_openai_like(out)
    converted.pop("name", None)
    return converted


def _to_openai(messages: Any, span: Span, key: str, strict: bool) -> list[dict[str, Any]] | None:
    """Convert a decoded message list (GenAI parts or OpenAI-like) to OpenAI messages."""
    if isinstance(messages, Mapping):  # 0.3 completions are sometimes a single message dict
        messages = [messages]
    if not isinstance(messages, list) or not all(isinstance(m, Mapping) for m in messages):
        if strict:
            raise ValueError(
                f"{_where(span, key)} must be a list of message objects, got {type(messages).__name__}"
            )
        return None
    out: list[dict[str, Any]] = []
    for message in messages:
        if "parts" in message:
            out.extend(_from_genai(message))
        elif "role" not in message and isinstance(message.get("message"), Mapping):
            out.append(_from_openinference(message["message"]))  # OpenInference, or a 0.3 choice
        else:
            out.append(_from_openai_like(message))
    return out


def _messages(span: Span, keys: tuple[str, ...], strict: bool) -> list[dict[str, Any]] | None:
    for key in keys:
        value = unflatten_prefix(span.attributes, key)
        if value is not None:
            return _to_openai(_loads(value, span, key, strict), span, key, strict)
    return None


def prompt_messages(span: Span, *, strict: bool = False) -> list[dict[str, Any]] | None:
    """The call's input as OpenAI chat messages (system instructions first), or None if not recorded.

    With ``strict``, a malformed attribute raises ``ValueError`` naming the span and key; otherwise
    it is treated as absent.
    """
    messages = _messages(span, _PROMPT_KEYS, strict)
    if messages is None and span.events:
        messages = _event_messages(span, "prompt", strict)
    system = span.attributes.get("gen_ai.system_instructions")
    if system is None and span.events:  # carried by the event that carried the messages (Google ADK)
        system = next(
            (
                e.attributes["gen_ai.system_instructions"]
                for e in span.events
                if "gen_ai.system_instructions" in e.attributes
            ),
            None,
        )
    if isinstance(system, str):
        parts = _loads(system, span, "gen_ai.system_instructions", strict)
        if isinstance(parts, list):
            head = _from_genai({"role": "system", "parts": parts})
            messages = head + (messages or [])
    return messages


def completion_messages(span: Span, *, strict: bool = False) -> list[dict[str, Any]] | None:
    """The call's output choices as OpenAI assistant messages, or None if not recorded."""
    messages = _messages(span, _COMPLETION_KEYS, strict)
    if messages is None and span.events:
        messages = _event_messages(span, "completion", strict)
    if messages is not None:
        # 0.3 operation output stores whole choices: {"message": {...}, "finish_reason": ...}
        messages = [
            _from_openai_like(m["message"]) if isinstance(m.get("message"), Mapping) else m for m in messages
        ]
    return messages


def request_tools(span: Span, *, strict: bool = False) -> list[dict[str, Any]] | None:
    """The tools offered to the model, in OpenAI format (``{"type": "function", "function": {...}}``)."""
    for key in _TOOLS_KEYS:
        value = unflatten_prefix(span.attributes, key)
        if value is None:
            continue
        value = _loads(value, span, key, strict)
        if not isinstance(value, list):
            if strict:
                raise ValueError(f"{_where(span, key)} must be a list of tools, got {type(value).__name__}")
            return None
        tools: list[dict[str, Any]] = []
        for tool in value:
            if isinstance(tool, Mapping) and isinstance(tool.get("tool"), Mapping):  # OpenInference
                tool = _loads(tool["tool"].get("json_schema"), span, key, strict)
            if not isinstance(tool, Mapping):
                continue
            function = dict(tool["function"]) if isinstance(tool.get("function"), Mapping) else dict(tool)
            function.pop("type", None)
            if isinstance(function.get("parameters"), str):
                function["parameters"] = _loads(function["parameters"], span, key, strict)
            tools.append({"type": "function", "function": function})
        return tools
    return None


def image_urls(messages: list[dict[str, Any]] | None) -> list[str]:
    """URLs (or data URLs) of every image in OpenAI-format messages, in order."""
    urls: list[str] = []
    for message in messages or []:
        content = message.get("content")
        if isinstance(content, list):
            for part in content:
                if isinstance(part, Mapping) and part.get("type") == "image_url":
                    url = part.get("image_url")
                    url = url.get("url") if isinstance(url, Mapping) else url
                    if isinstance(url, str):
                        urls.append(url)
    return urls


def llm_call_pattern(pattern: str | re.Pattern[str]) -> re.Pattern[str]:
    """Compile an ``llm_call_match``/``agent_match`` regex, with a clear error when it is invalid."""
    if isinstance(pattern, re.Pattern):
        return pattern
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"Invalid regular expression {pattern!r}: {exc}") from None


# ---------------------------------------------------------------------------- span events (earlier forms)

_MESSAGE_EVENTS = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
_EVENT_BODY_KEYS = ("gen_ai.event.content", "body", "event.body")


def _event_body(attributes: Mapping[str, Any], span: Span, strict: bool) -> dict[str, Any]:
    """An event's body: a JSON body attribute, or its own (flattened) attributes."""
    for key in _EVENT_BODY_KEYS:
        if key in attributes:
            body = _loads(attributes[key], span, key, strict)
            if isinstance(body, Mapping):
                return dict(body)
    body = unflatten_attributes(dict(attributes)) if attributes else {}
    return dict(body) if isinstance(body, Mapping) else {}


def _is_gemini_content(value: Any) -> bool:
    return isinstance(value, Mapping) and isinstance(value.get("parts"), list)


def _event_messages(
    span: Span, which: Literal["prompt", "completion"], strict: bool
) -> list[dict[str, Any]] | None:
    """Messages carried by span events (see the module docstring), or None when there are none."""
    whole_key = GEN_AI_INPUT_MESSAGES if which == "prompt" else GEN_AI_OUTPUT_MESSAGES
    legacy_key = "gen_ai.prompt" if which == "prompt" else "gen_ai.completion"
    found: list[dict[str, Any]] = []
    for event in span.events:
        attributes = event.attributes
        for key in (whole_key, legacy_key):
            if key in attributes:
                converted = _to_openai(_loads(attributes[key], span, key, strict), span, key, strict)
                return converted
        if which == "prompt" and event.name in _MESSAGE_EVENTS:
            body = _event_body(attributes, span, strict)
            role = _MESSAGE_EVENTS[event.name]
            if _is_gemini_content(body.get("content")):  # Google ADK: {"content": Content.model_dump()}
                found.extend(_from_genai({"role": role, **body["content"]}))
                continue
            body.setdefault("role", role)
            if "id" in body and body["role"] == "tool":
                body.setdefault("tool_call_id", body.pop("id"))
            found.append(_from_openai_like(body))
        elif which == "completion" and event.name == "gen_ai.choice":
            body = _event_body(attributes, span, strict)
            message = body.get("message")
            message = _loads(message, span, "message", strict) if isinstance(message, str) else message
            if message is None and _is_gemini_content(body.get("content")):
                found.extend(_from_genai({**body["content"], "role": "assistant"}))
                continue
            found.append(
                _from_openai_like({"role": "assistant", **(message if isinstance(message, Mapping) else {})})
            )
    return found or None


# ---------------------------------------------------------------------------- model, usage, detection

LlmShape = Literal[
    "otel-genai", "otel-genai-events", "openllmetry", "openinference", "agentlightning", "unknown"
]
"""Which convention an LLM span follows (see the module docstring)."""

LLM_OPERATIONS = frozenset({"chat", "text_completion", "generate_content", "responses", "completion"})
"""``gen_ai.operation.name`` values of LLM calls."""
_NOT_LLM_OPERATIONS = frozenset(
    {"embeddings", "execute_tool", "invoke_agent", "create_agent", "invoke_workflow"}
)
_LLM_SPAN_NAME = re.compile(r"^(chat|text_completion|responses)( |$)|^openai\.chat\.completion$")
_OPENINFERENCE_CALL_PREFIXES = (
    "llm.input_messages.",
    "llm.output_messages.",
    "llm.token_count.",
    "llm.prompts",
)
_OPENINFERENCE_GENERIC_PREFIXES = (
    "openinference.",
    "input.",
    "output.",
    "llm.model_name",
    "llm.invocation_parameters",
    "llm.provider",
    "llm.system",
    "llm.finish_reason",
    "metadata",
    "session.id",
    "user.id",
    "tag.tags",
)
_LLM_PREFIXES = ("gen_ai.prompt.", "gen_ai.completion.", "llm.input_messages.", "llm.output_messages.")
_LLM_EVENTS = frozenset(
    {"gen_ai.content.prompt", "gen_ai.content.completion", "gen_ai.choice", *_MESSAGE_EVENTS}
)
_MODEL_KEYS = ("gen_ai.response.model", "gen_ai.request.model", "llm.model_name", "llm.response.model")
_INPUT_TOKEN_KEYS = (
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.prompt_tokens",
    "llm.token_count.prompt",
    "llm.usage.prompt_tokens",
)
_OUTPUT_TOKEN_KEYS = (
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.completion_tokens",
    "llm.token_count.completion",
    "llm.usage.completion_tokens",
)
_PROVIDER_KEYS = ("gen_ai.provider.name", "gen_ai.system", "llm.provider", "llm.system")


@dataclass(frozen=True)
class Usage:
    """Token counts the provider reported (None when not recorded)."""

    input_tokens: int | None = None
    output_tokens: int | None = None


def _first_str(attributes: Mapping[str, Any], keys: tuple[str, ...]) -> str | None:
    for key in keys:
        value = attributes.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _first_int(attributes: Mapping[str, Any], keys: tuple[str, ...]) -> int | None:
    for key in keys:
        value = attributes.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def model(span: Span) -> str | None:
    """The model that answered (response model, else request model), or None."""
    return _first_str(span.attributes, _MODEL_KEYS)


def usage(span: Span) -> Usage:
    """The call's token usage in any convention."""
    return Usage(
        _first_int(span.attributes, _INPUT_TOKEN_KEYS), _first_int(span.attributes, _OUTPUT_TOKEN_KEYS)
    )


def is_llm_span(span: Span) -> bool:
    """Whether the span records one LLM call, judged by its attributes (any shape), events or 0.3 name.

    Tool, agent and embedding spans are not LLM calls even when they carry GenAI attributes.
    """
    attributes = span.attributes
    operation = attributes.get(GEN_AI_OPERATION_NAME)
    if operation in LLM_OPERATIONS:
        return True
    if operation in _NOT_LLM_OPERATIONS:
        return False
    kind = attributes.get("openinference.span.kind")
    if kind is not None:
        # a method of an LLM class that made no call itself carries only OpenInference's generic keys
        # (LlamaIndex's _prepare_chat_with_tools, its astream_chat span around the one that records the
        # streamed call); a span with keys of an unknown shape is kept, so that agl doctor names them
        return kind == "LLM" and (
            any(key.startswith(_OPENINFERENCE_CALL_PREFIXES) for key in attributes)
            or not all(key.startswith(_OPENINFERENCE_GENERIC_PREFIXES) for key in attributes)
        )
    if attributes.get("llm.request.type") in ("chat", "completion"):
        return True
    if is_proxy_llm_span(span) or _LLM_SPAN_NAME.search(span.name):
        return True
    if GEN_AI_INPUT_MESSAGES in attributes or GEN_AI_OUTPUT_MESSAGES in attributes:
        return True
    if (
        RESPONSE_TOKEN_IDS in attributes
        or "agentlightning.operation.output.choices.0.token_ids" in attributes
    ):
        return True
    if any(key.startswith(_LLM_PREFIXES) for key in attributes):
        return True
    return any(event.name in _LLM_EVENTS for event in span.events)


def llm_shape(span: Span) -> LlmShape:
    """Which convention the span's messages follow (``"unknown"`` when none is recognised)."""
    attributes = span.attributes
    if GEN_AI_INPUT_MESSAGES in attributes or GEN_AI_OUTPUT_MESSAGES in attributes:
        return "otel-genai"
    keys = list(attributes)
    if any(key.startswith(("llm.input_messages.", "llm.output_messages.")) for key in keys):
        return "openinference"
    if any(key.startswith(("gen_ai.prompt.", "gen_ai.completion.")) for key in keys):
        return "openllmetry"
    if any(key.startswith("agentlightning.operation.") for key in keys):
        return "agentlightning"
    if any(event.name in _LLM_EVENTS or GEN_AI_INPUT_MESSAGES in event.attributes for event in span.events):
        return "otel-genai-events"
    return "unknown"


def compat_span_name(span: Span) -> str:
    """Agent Lightning 0.3's name for this LLM call (``openai.chat.completion``, ``openai.completion``).

    0.3 code selects LLM spans with regexes on that name (``llm_call_match=r"openai\\.chat\\.completion"``);
    adapters match such patterns against this alias too, whatever the span is really called.
    """
    provider = _first_str(span.attributes, _PROVIDER_KEYS) or "openai"
    provider = provider.lower().split(".")[0].replace("az.ai", "azure")
    operation = span.attributes.get(GEN_AI_OPERATION_NAME) or span.attributes.get("llm.request.type")
    if operation in ("text_completion", "completion"):
        return f"{provider}.completion"
    return f"{provider}.chat.completion"


def unread_keys(span: Span, limit: int = 30) -> list[str]:
    """The span's attribute keys, list indices shown as ``N`` (deduplicated), for "cannot read" reports."""
    seen: dict[str, None] = {}
    for key in span.attributes:
        seen.setdefault(re.sub(r"\.\d+(?=\.|$)", ".N", key), None)
        if len(seen) >= limit:
            break
    return list(seen)


@dataclass(frozen=True)
class LlmCall:
    """One LLM call as every adapter sees it, whatever shape the span had."""

    span: Span
    shape: LlmShape
    prompt_messages: list[dict[str, Any]] | None
    completion_messages: list[dict[str, Any]] | None
    tools: list[dict[str, Any]] | None
    model: str | None
    response_id: str | None
    usage: Usage
    prompt_token_ids: list[int] | None
    response_token_ids: list[int] | None
    logprobs: Any

    @property
    def readable(self) -> bool:
        """Whether the prompt or the completion could be read."""
        return self.prompt_messages is not None or self.completion_messages is not None


def read_llm_call(span: Span, *, strict: bool = False) -> LlmCall | None:
    """The span as an :class:`LlmCall`, or None when it is not an LLM call (:func:`is_llm_span`).

    With ``strict``, malformed JSON attributes raise ``ValueError`` naming the span and key.
    """
    if not is_llm_span(span):
        return None
    return LlmCall(
        span=span,
        shape=llm_shape(span),
        prompt_messages=prompt_messages(span, strict=strict),
        completion_messages=completion_messages(span, strict=strict),
        tools=request_tools(span, strict=strict),
        model=model(span),
        response_id=response_id(span),
        usage=usage(span),
        prompt_token_ids=prompt_token_ids(span),
        response_token_ids=response_token_ids(span),
        logprobs=logprobs(span),
    )
