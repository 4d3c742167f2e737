"""Compatibility module for Agent Lightning 0.3's ``agentlightning.client``.

Listed in docs/migrating-from-agent-lightning.md.

The deprecated v0.1 client is not provided; the names raise NotProvidedError naming the replacement.
"""

from __future__ import annotations

from typing import Any

from agl_core._compat import module_getattr

__all__ = []

_NAMES: dict[str, Any] = {}

_DROPPED: dict[str, str] = {
    "AgentLightningClient": (
        "the v0.1 HTTP stack (deprecated since 0.2) was removed; run agents with Trainer.fit() or "
        "`agl runner` against a LightningStore (LightningStoreServer / `agl store serve`)"
    ),
    "DevTaskLoader": (
        "the v0.1 HTTP stack (deprecated since 0.2) was removed; run agents with Trainer.fit() or "
        "`agl runner` against a LightningStore (LightningStoreServer / `agl store serve`); for "
        "tests, use an InMemoryLightningStore"
    ),
}

__getattr__ = module_getattr("agl_core.client", _NAMES, _DROPPED)
