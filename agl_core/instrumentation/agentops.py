"""Compatibility module for Agent Lightning 0.3's ``agentlightning.instrumentation.agentops``.

Listed in docs/migrating-from-agent-lightning.md. The patch lives in the agl-agentops plugin
(`agl_agentops.token_ids`): it adds prompt/response token ids, logprobs and tool definitions to AgentOps'
OpenAI chat spans, as 0.3's patch did. ``AgentOpsTracer`` applies it by itself; call these only when you
drive AgentOps without that tracer.
"""

from __future__ import annotations

from agl_core._compat import import_required

__all__ = ["instrument_agentops", "uninstrument_agentops"]

_MODULE = "agl_agentops.token_ids"


def instrument_agentops() -> bool:
    """Add token ids (and logprobs, tools) to AgentOps' OpenAI chat spans; False without ``openai``.

    Needs the agl-agentops plugin (``pip install agl-agentops``, which installs AgentOps).
    """
    return bool(import_required(_MODULE, "instrument_agentops", "agl-agentops").instrument_token_ids())


def uninstrument_agentops() -> None:
    """Undo `instrument_agentops` (a no-op if it is not applied)."""
    import_required(_MODULE, "uninstrument_agentops", "agl-agentops").uninstrument_token_ids()
