"""The agl LLM proxy: an OpenAI-compatible gateway on aiohttp that records exact token ids per rollout.

Agents send OpenAI requests to ``<endpoint>/rollout/{rollout_id}/attempt/{attempt_id}/v1/...`` (what
``ProxyLLM.get_base_url`` builds); the proxy forwards them to the model's backends (vLLM-style servers or
in-process samplers), answers with the backend's response unchanged, and records one
``agl.llm_proxy.request`` span per request in the store. See ``docs/llm-proxy.md``.
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
from agl_core.llm_proxy.recording import SPAN_NAME
from agl_core.llm_proxy.stats import ProxyStats

__all__ = [
    "SPAN_NAME",
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
    "model_list_to_backends",
]
