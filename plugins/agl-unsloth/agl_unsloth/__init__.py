"""agl-unsloth: iterated supervised fine-tuning (LoRA) of the served model on its own best rollouts.

``agl_unsloth.SFT`` is the algorithm (registry name ``sft``, alias ``unsloth``);
``agl_unsloth.testing.build_tiny_model`` builds a tiny local model for tests and smoke runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.4.0"

__all__ = ["SFT", "__version__"]

if TYPE_CHECKING:
    from agl_unsloth.algorithm import SFT


def __getattr__(name: str) -> Any:
    """Import the algorithm (and torch/transformers) only when it is used."""
    if name == "SFT":
        from agl_unsloth.algorithm import SFT

        return SFT
    raise AttributeError(f"module 'agl_unsloth' has no attribute {name!r}")
