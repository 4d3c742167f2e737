"""Compatibility module for Agent Lightning 0.3's ``agentlightning.runner.legacy``.

Listed in docs/migrating-from-agent-lightning.md."""

from __future__ import annotations

from typing import Any

from agl_core._compat import module_getattr

__all__ = []

_NAMES: dict[str, Any] = {}

_REASON = (
    "the v0.1 HTTP stack (deprecated since 0.2) was removed; run agents with Trainer.fit() or `agl "
    "runner` against a LightningStore (LightningStoreServer / `agl store serve`); use LitAgentRunner"
)

_DROPPED: dict[str, str] = dict.fromkeys(["LegacyAgentRunner"], _REASON)

__getattr__ = module_getattr("agl_core.runner.legacy", _NAMES, _DROPPED)
