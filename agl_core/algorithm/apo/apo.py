"""Compatibility module for Agent Lightning 0.3's ``agentlightning.algorithm.apo.apo``.

Listed in docs/migrating-from-agent-lightning.md.

``APO`` and 0.3's helpers next to it (``GRADIENT_PROMPT_FILES``, ``APPLY_EDIT_PROMPT_FILES``: POML files
of agl-apo's own prompts; ``RolloutResultForAPO``, ``VersionedPromptTemplate``) live in the agl-apo plugin
(``pip install agl-apo``) and are loaded on first access.
"""

from __future__ import annotations

from agl_core._compat import PluginName, module_getattr

__all__ = ["APO"]  # noqa: F822 (resolved by __getattr__)

_HELPERS = [
    "APPLY_EDIT_PROMPT_FILES",
    "GRADIENT_PROMPT_FILES",
    "RolloutResultForAPO",
    "VersionedPromptTemplate",
]

__getattr__ = module_getattr(
    __name__,
    {
        "APO": PluginName("algorithm", "apo", "agl-apo"),
        **{name: PluginName("algorithm", "apo", "agl-apo", attribute=name) for name in _HELPERS},
    },
)
