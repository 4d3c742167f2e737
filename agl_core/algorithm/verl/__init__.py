"""Compatibility module for Agent Lightning 0.3's ``agentlightning.algorithm.verl``.

Listed in docs/migrating-from-agent-lightning.md.

``VERL`` lives in the agl-verl plugin (``pip install agl-verl``) and is loaded on first access.
"""

from __future__ import annotations

from agl_core._compat import PluginName, module_getattr

__all__ = ["VERL"]

__getattr__ = module_getattr(__name__, {"VERL": PluginName("algorithm", "verl", "agl-verl")})
