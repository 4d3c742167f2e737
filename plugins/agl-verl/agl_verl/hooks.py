"""Entry point of the agl-verl plugin: registers the ``verl`` algorithm (imports nothing but agl_core)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agl_core import hookimpl

if TYPE_CHECKING:
    from agl_core.registry import Registry

#: What the algorithm needs beyond agl-core; without it ``agl plugins list`` shows the install hint.
REQUIRES = ["verl>=0.9,<0.10"]


AGL_PLUGIN_API_VERSION = 1
"""The agl plugin contract version these hooks are built for (see `agl plugins check`)."""


@hookimpl
def agl_register_algorithms(registry: Registry[Any]) -> None:
    """Register ``verl`` (:class:`agl_verl.algorithm.VERL`), imported only when it is first used."""
    registry.add(
        "verl",
        "agl_verl.algorithm:VERL",
        summary="Multi-GPU / multi-node RL with verl (GRPO/PPO on Ray), vLLM rollouts via the agl LLM proxy",
        requires=REQUIRES,
    )
