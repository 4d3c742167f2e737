"""`FastAlgorithm`: the marker of algorithms cheap enough for ``Trainer.dev()``."""

from __future__ import annotations

from agl_core.algorithm.base import Algorithm

__all__ = ["FastAlgorithm"]


class FastAlgorithm(Algorithm):
    """An algorithm that only runs the agent (no training): ``Trainer.dev()`` uses it for quick checks."""


def __getattr__(name: str) -> object:
    # Agent Lightning 0.3 exported Baseline from this module too (docs/migrating-from-agent-lightning.md).
    if name == "Baseline":
        from agl_core.algorithm.baseline import Baseline

        return Baseline
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
