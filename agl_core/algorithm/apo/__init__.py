"""Compatibility module for Agent Lightning 0.3's ``agentlightning.algorithm.apo``.

Listed in docs/migrating-from-agent-lightning.md.

``APO`` lives in the agl-apo plugin (``pip install agl-apo``) and is loaded on first access.
"""

from __future__ import annotations

from agl_core._compat import PluginName, module_getattr

__all__ = ["APO"]

__getattr__ = module_getattr(__name__, {"APO": PluginName("algorithm", "apo", "agl-apo")})
