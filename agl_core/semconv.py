"""Semantic conventions: every span name and attribute key agl writes or reads, in one place.

The ``agentlightning.*`` strings are exactly those of Agent Lightning 0.3, so traces stay compatible.
LLM-call spans follow the OpenTelemetry GenAI semantic conventions as the official
``opentelemetry-instrumentation-openai-v2`` writes them (span name ``"chat {model}"`` or
``"text_completion {model}"``, content as JSON strings in the GenAI "parts" format), plus agl's
additions: the token ids and logprobs that RL training needs, the raw tools list, and the capture source.
"""

from __future__ import annotations

from enum import Enum

from pydantic import BaseModel

__all__ = [
    "AGL_ANNOTATION",
    "AGL_EXCEPTION",
    "AGL_LLM_SOURCE",
    "AGL_MESSAGE",
    "AGL_OBJECT",
    "AGL_OPERATION",
    "AGL_REWARD",
    "AGL_VIRTUAL",
    "EXCEPTION_ESCAPED",
    "EXCEPTION_MESSAGE",
    "EXCEPTION_STACKTRACE",
    "EXCEPTION_TYPE",
    "GEN_AI_INPUT_MESSAGES",
    "GEN_AI_OPERATION_CHAT",
    "GEN_AI_OPERATION_NAME",
    "GEN_AI_OPERATION_RESPONSES",
    "GEN_AI_OPERATION_TEXT_COMPLETION",
    "GEN_AI_OUTPUT_MESSAGES",
    "GEN_AI_PROVIDER_NAME",
    "GEN_AI_REQUEST_MODEL",
    "GEN_AI_REQUEST_TOOLS",
    "GEN_AI_RESPONSE_FINISH_REASONS",
    "GEN_AI_RESPONSE_ID",
    "GEN_AI_RESPONSE_MODEL",
    "GEN_AI_SYSTEM",
    "GEN_AI_SYSTEM_INSTRUCTIONS",
    "GEN_AI_TOOL_DEFINITIONS",
    "GEN_AI_USAGE_INPUT_TOKENS",
    "GEN_AI_USAGE_OUTPUT_TOKENS",
    "LLM_SOURCE_PROXY",
    "LLM_SOURCE_TRACER",
    "LOGPROBS_CONTENT",
    "PROMPT_TOKEN_IDS",
    "RESPONSE_TOKEN_IDS",
    "LightningResourceAttributes",
    "LightningSpanAttributes",
    "LinkAttributes",
    "LinkPydanticModel",
    "RewardAttributes",
    "RewardPydanticModel",
]

# ---------------------------------------------------------------------------------------- span names

AGL_ANNOTATION = "agentlightning.annotation"
"""Annotation span (rewards, tags, links, metadata); written by ``emit_annotation``/``emit_reward``."""
AGL_MESSAGE = "agentlightning.message"
"""Free-text message span; written by ``emit_message``."""
AGL_OBJECT = "agentlightning.object"
"""Serialized object span; written by ``emit_object``."""
AGL_EXCEPTION = "agentlightning.exception"
"""Exception record span; written by ``emit_exception``."""
AGL_OPERATION = "agentlightning.operation"
"""A traced unit of work (the ``operation`` decorator / context manager)."""
AGL_REWARD = "agentlightning.reward"
"""Reward span name of Agent Lightning 0.2 (readers still accept it)."""
AGL_VIRTUAL = "agentlightning.virtual"
"""Synthetic span with no OpenTelemetry span behind it (``Span.from_attributes``)."""


class LightningResourceAttributes(str, Enum):
    """Keys agl puts in a span's resource (or reads from an OTLP resource) to identify its rollout."""

    ROLLOUT_ID = "agentlightning.rollout_id"
    ATTEMPT_ID = "agentlightning.attempt_id"
    SPAN_SEQUENCE_ID = "agentlightning.span_sequence_id"
    TRACER_NAME = "agentlightning.tracer.name"


class LightningSpanAttributes(str, Enum):
    """Attribute keys (or key prefixes) of the ``agentlightning.*`` spans."""

    REWARD = "agentlightning.reward"
    """Prefix: ``agentlightning.reward.<i>.name`` / ``.value``; index 0 is the primary reward."""
    LINK = "agentlightning.link"
    """Prefix: ``agentlightning.link.<i>.key_match`` / ``.value_match``."""
    TAG = "agentlightning.tag"
    """Prefix: ``agentlightning.tag.<i>``."""
    MESSAGE_BODY = "agentlightning.message.body"
    OBJECT_TYPE = "agentlightning.object.type"
    OBJECT_LITERAL = "agentlightning.object.literal"
    OBJECT_JSON = "agentlightning.object.json"
    OPERATION_NAME = "agentlightning.operation.name"
    OPERATION_INPUT = "agentlightning.operation.input"
    OPERATION_OUTPUT = "agentlightning.operation.output"


class RewardAttributes(str, Enum):
    """Keys of one reward dimension under ``agentlightning.reward.<i>``."""

    REWARD_NAME = "name"
    REWARD_VALUE = "value"


class LinkAttributes(str, Enum):
    """Keys of one link under ``agentlightning.link.<i>``; ``trace_id``/``span_id`` keys match span ids."""

    KEY_MATCH = "key_match"
    VALUE_MATCH = "value_match"


class RewardPydanticModel(BaseModel):
    """One reward dimension: a name and a numeric value."""

    name: str
    value: float


class LinkPydanticModel(BaseModel):
    """One link: the attribute key to look up on a target span and the value it must have."""

    key_match: str
    value_match: str


# ------------------------------------------------------------------ OpenTelemetry exception attributes

EXCEPTION_TYPE = "exception.type"
EXCEPTION_MESSAGE = "exception.message"
EXCEPTION_ESCAPED = "exception.escaped"
EXCEPTION_STACKTRACE = "exception.stacktrace"

# ------------------------------------------------- LLM-call spans: OpenTelemetry GenAI conventions

GEN_AI_OPERATION_NAME = "gen_ai.operation.name"
"""``"chat"`` or ``"text_completion"``; the span name is ``"{operation} {request model}"``."""
GEN_AI_OPERATION_CHAT = "chat"
GEN_AI_OPERATION_TEXT_COMPLETION = "text_completion"
GEN_AI_PROVIDER_NAME = "gen_ai.provider.name"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_RESPONSE_ID = "gen_ai.response.id"
GEN_AI_RESPONSE_MODEL = "gen_ai.response.model"
GEN_AI_RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
GEN_AI_USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
GEN_AI_INPUT_MESSAGES = "gen_ai.input.messages"
"""JSON list of ``{"role", "parts": [{"type": "text", "content"}, {"type": "tool_call", ...}, ...]}``."""
GEN_AI_OUTPUT_MESSAGES = "gen_ai.output.messages"
"""JSON list of ``{"role", "parts": [...], "finish_reason"}``, one per choice."""
GEN_AI_SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
"""JSON list of parts: the system prompt / instructions given apart from the messages."""
GEN_AI_TOOL_DEFINITIONS = "gen_ai.tool.definitions"
"""JSON list of ``{"type": "function", "name", "description", "parameters"}``: the tools offered."""
GEN_AI_OPERATION_RESPONSES = "responses"
"""``gen_ai.operation.name`` agl writes for the OpenAI Responses API (``client.responses.create``)."""
GEN_AI_SYSTEM = "gen_ai.system"
"""Earlier name of ``gen_ai.provider.name`` (still read)."""

# ---------------------------------------------------------------- agl's additions to LLM-call spans

GEN_AI_REQUEST_TOOLS = "gen_ai.request.tools"
"""Former agl key of the tools list (OpenAI format); read, not written (``gen_ai.tool.definitions`` is)."""
PROMPT_TOKEN_IDS = "prompt_token_ids"
"""``list[int]``: the prompt's token ids as the server returned them (vLLM ``prompt_token_ids``)."""
RESPONSE_TOKEN_IDS = "response_token_ids"
"""``list[int]``: the first choice's generated token ids (vLLM ``choices[0].token_ids``)."""
LOGPROBS_CONTENT = "logprobs.content"
"""JSON string of the first choice's ``logprobs.content`` list (``[{"token", "logprob", ...}]``)."""
AGL_LLM_CLIENT_API = "agl.llm.client_api"
"""The API the agent spoke when the LLM proxy translated it to chat completions (``openai.responses``)."""
AGL_LLM_REQUEST_DROPPED = "agl.llm.request.dropped"
"""Request fields the LLM proxy's translation did not carry to the chat backend (a list of strings)."""
AGL_LLM_SIDE_CALL = "agl.llm.side_call"
"""Set on a harness side call (not one of the agent's turns): the proxy's rule that matched it."""
AGL_LLM_REFUSED = "agl.llm.refused"
"""True on the span of a request the LLM proxy refused itself (status and reason on the span)."""
AGL_LLM_TOKEN_IDS_MISSING = "agl.llm.token_ids_missing"
"""Why a successful call has no prompt and/or response token ids (absent when it has both); `agl doctor`
quotes it."""
AGL_LLM_SOURCE = "agl.llm.source"
"""Who recorded the LLM call: :data:`LLM_SOURCE_TRACER` or :data:`LLM_SOURCE_PROXY`."""
LLM_SOURCE_TRACER = "tracer"
LLM_SOURCE_PROXY = "proxy"
