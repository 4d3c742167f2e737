"""Entry point of the agl-unsloth plugin: registers the ``sft`` algorithm (imports nothing but agl_core)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agl_core import hookimpl

if TYPE_CHECKING:
    from agl_core.registry import Registry


AGL_PLUGIN_API_VERSION = 1
"""The agl plugin contract version these hooks are built for (see `agl plugins check`)."""


@hookimpl
def agl_register_algorithms(registry: Registry[Any]) -> None:
    """Register ``sft`` (alias ``unsloth``): :class:`agl_unsloth.algorithm.SFT`, imported on first use."""
    registry.add(
        "sft",
        "agl_unsloth.algorithm:SFT",
        aliases=["unsloth"],
        summary="Iterated LoRA SFT on the best rollouts (unsloth on GPU, transformers + TRL on CPU)",
        requires=["transformers>=5", "peft>=0.17", "trl>=1.16", "datasets>=4", "matplotlib>=3.7", "rich>=13"],
    )
