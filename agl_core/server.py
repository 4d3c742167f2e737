"""Compatibility module for Agent Lightning 0.3's ``agentlightning.server``.

Listed in docs/migrating-from-agent-lightning.md.

The deprecated v0.1 server is not provided; the names raise NotProvidedError naming the replacement.
"""

from __future__ import annotations

from typing import Any

from agl_core._compat import module_getattr

__all__ = []

_NAMES: dict[str, Any] = {}

_REASON = (
    "the v0.1 HTTP stack (deprecated since 0.2) was removed; run agents with Trainer.fit() or `agl "
    "runner` against a LightningStore (LightningStoreServer / `agl store serve`)"
)

_DROPPED: dict[str, str] = dict.fromkeys(["AgentLightningServer", "ServerDataStore"], _REASON)

__getattr__ = module_getattr("agl_core.server", _NAMES, _DROPPED)
