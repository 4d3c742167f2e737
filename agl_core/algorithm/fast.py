"""`FastAlgorithm`: the marker of algorithms cheap enough for ``Trainer.dev()``."""

from __future__ import annotations

from agl_core.algorithm.base import Algorithm

__all__ = ["FastAlgorithm"]


class FastAlgorithm(Algorithm):
    """An algorithm that only runs the agent (no training): ``Trainer.dev()`` uses it for quick checks."""
