"""The agl LLM proxy: an OpenAI-compatible gateway on aiohttp that records exact token ids per rollout.

Agents send OpenAI requests (chat completions, completions, Responses) or Anthropic Messages requests to
``<endpoint>/rollout/{rollout_id}/attempt/{attempt_id}/v1/...`` (what ``ProxyLLM.get_base_url``
builds); the proxy forwards them to the model's backends (vLLM-style servers or in-process samplers),
answers chat and completions with the backend's response unchanged, translates Responses and Messages
to and from chat completions (with the ``agl-proxy-translate`` plugin; 501 without it), and records
one ``agl.llm_proxy.request`` span per request in the store.
See ``docs/llm-proxy.md``.
"""

from agl_core.llm_proxy.backends import (
    WILDCARD_MODEL,
    BackendsSpec,
    BalancingPolicy,
    HttpBackend,
    InProcessBackend,
    ModelConfig,
    model_list_to_backends,
)
from agl_core.llm_proxy.errors import BackendConfigError, ProxyHTTPError
from agl_core.llm_proxy.proxy import LLMProxy
from agl_core.llm_proxy.recording import CLIENT_API, SPAN_NAME, TOKEN_IDS_MISSING
from agl_core.llm_proxy.request_options import KNOWN_VOLATILE_LINES, RequestOptions
from agl_core.llm_proxy.stats import ProxyStats
from agl_core.llm_proxy.urls import rollout_urls

__all__ = [
    "CLIENT_API",
    "KNOWN_VOLATILE_LINES",
    "SPAN_NAME",
    "TOKEN_IDS_MISSING",
    "WILDCARD_MODEL",
    "BackendConfigError",
    "BackendsSpec",
    "BalancingPolicy",
    "HttpBackend",
    "InProcessBackend",
    "LLMProxy",
    "ModelConfig",
    "ProxyHTTPError",
    "ProxyStats",
    "RequestOptions",
    "model_list_to_backends",
    "rollout_urls",
]
