"""Compatibility module for Agent Lightning 0.3's ``agentlightning.algorithm.apo.apo``.

Listed in docs/migrating-from-agent-lightning.md.

``APO`` lives in the agl-apo plugin (``pip install agl-apo``) and is loaded on first access; its helpers
are the plugin's own business.
"""

from __future__ import annotations

from typing import Any

from agl_core._compat import PluginName, module_getattr

__all__ = ["APO"]  # noqa: F822 (resolved by __getattr__)

_NAMES: dict[str, Any] = {
    "APO": PluginName("algorithm", "apo", "agl-apo"),
}

_DROPPED: dict[str, str] = dict.fromkeys(
    ["APPLY_EDIT_PROMPT_FILES", "GRADIENT_PROMPT_FILES", "RolloutResultForAPO", "VersionedPromptTemplate"],
    "agl-apo has no POML prompt files or per-rollout POML records; its critic and editor prompts are built "
    "in agl_apo.prompts and its beam in agl_apo.search",
)

__getattr__ = module_getattr("agl_core.algorithm.apo.apo", _NAMES, _DROPPED)
