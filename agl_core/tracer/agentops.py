"""Compatibility module for Agent Lightning 0.3's ``agentlightning.tracer.agentops``.

Listed in docs/migrating-from-agent-lightning.md.

``AgentOpsTracer`` lives in the agl-agentops plugin (``pip install agl-agentops``) and is loaded on first
access.
"""

from __future__ import annotations

from agl_core._compat import PluginName, module_getattr

__all__ = ["AgentOpsTracer"]  # noqa: F822 (resolved by __getattr__)

__getattr__ = module_getattr(__name__, {"AgentOpsTracer": PluginName("tracer", "agentops", "agl-agentops")})
