"""Agent Lightning 0.3's ``LLMProxy(callbacks=...)``, checked for agl (compatibility; see
docs/migrating-from-agent-lightning.md).

0.3 installed LiteLLM callbacks by alias: ``"return_token_ids"`` (ask vLLM for token ids) and
``"opentelemetry"`` (export spans to the store) were the default, ``"logprobs"`` asked for logprobs.
agl's proxy always does the first two, so those aliases are accepted as no-ops; logprobs are recorded
whenever the client asks for them (``logprobs=True`` in the request), so ``"logprobs"`` and LiteLLM
callback classes raise a ValueError saying so.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["ALWAYS_ON_CALLBACKS", "check_legacy_callbacks"]

ALWAYS_ON_CALLBACKS = frozenset({"return_token_ids", "opentelemetry"})
"""0.3 callback aliases that agl's proxy always applies."""


def check_legacy_callbacks(callbacks: Sequence[object] | None) -> None:
    """Accept 0.3's default callbacks; raise ValueError for any agl cannot apply, naming what to do."""
    for callback in callbacks or ():
        if callback in ALWAYS_ON_CALLBACKS:
            continue
        if callback == "logprobs":
            raise ValueError(
                "LLMProxy(callbacks=['logprobs']) is not needed with agl: ask for logprobs in the request "
                "(logprobs=True) and the proxy records them."
            )
        raise ValueError(
            f"LLMProxy callback {callback!r} is not supported: agl's proxy is not LiteLLM. It always records "
            f"token ids and spans ({', '.join(sorted(ALWAYS_ON_CALLBACKS))} are accepted as no-ops)."
        )
