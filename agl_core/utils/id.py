"""Compatibility module for Agent Lightning 0.3's ``agentlightning.utils.id``.

Listed in docs/migrating-from-agent-lightning.md."""

from __future__ import annotations

import hashlib
import uuid


def generate_id(length: int) -> str:
    """A random id: the first ``length`` hex characters of the SHA-1 of a fresh UUID4 (as in 0.3)."""
    return hashlib.sha1(uuid.uuid4().bytes).hexdigest()[:length]


__all__ = ["generate_id"]
