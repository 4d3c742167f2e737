"""`FastAlgorithm`: the marker of algorithms cheap enough for ``Trainer.dev()``."""

from __future__ import annotations

from typing import Any

from agl_core.algorithm.base import Algorithm

__all__ = ["FastAlgorithm"]


class FastAlgorithm(Algorithm):
    """An algorithm that only runs the agent (no training): ``Trainer.dev()`` uses it for quick checks."""


# Agent Lightning 0.3 exported Baseline from this module too (the table in agl_core._moved03).
def __getattr__(name: str) -> Any:
    from agl_core._moved03 import moved_name

    return moved_name(__name__, name)
