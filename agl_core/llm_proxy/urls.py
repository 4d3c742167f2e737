"""The per-rollout base URLs of the proxy, under the names agent SDKs and CLIs read them from."""

from __future__ import annotations

from agl_core.types import ProxyLLM

__all__ = ["rollout_urls"]


def rollout_urls(proxy_url: str, rollout_id: str, attempt_id: str) -> dict[str, str]:
    """The base URLs routing an agent's calls to one rollout attempt through the proxy at ``proxy_url``.

    ``OPENAI_BASE_URL`` ends in ``/v1`` (the OpenAI SDKs, LiteLLM, Codex's ``base_url``);
    ``ANTHROPIC_BASE_URL`` does not (the Anthropic SDKs and Claude Code add ``/v1/messages``).

    Raises:
        ValueError: if ``proxy_url`` is not an ``http(s)://`` URL.
    """
    if not proxy_url.startswith(("http://", "https://")):
        raise ValueError(f"The proxy URL must start with http:// or https://, got {proxy_url!r}.")
    base = proxy_url.rstrip("/")
    base = base.removesuffix("/v1")
    routed = ProxyLLM(endpoint=f"{base}/v1", model="any").get_base_url(rollout_id, attempt_id)
    return {"OPENAI_BASE_URL": routed, "ANTHROPIC_BASE_URL": routed.removesuffix("/v1")}
