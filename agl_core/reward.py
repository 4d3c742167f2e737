"""Compatibility module for Agent Lightning 0.3's deprecated ``agentlightning.reward`` (use agl_core.emitter).

Importing it warns as 0.3 did and re-exports the reward emitter. As in 0.3 the import makes
``agl_core.reward`` this module instead of the decorator; unlike 0.3 the module object is callable and
forwards to :func:`agl_core.emitter.reward`, so ``@agl.reward`` keeps working. Listed in
docs/migrating-from-agent-lightning.md.
"""

from __future__ import annotations

import sys
import types
import warnings
from typing import Any

from agl_core.emitter.reward import (
    emit_reward,
    find_final_reward,
    find_reward_spans,
    get_reward_value,
    get_rewards_from_span,
    is_reward_span,
    reward,
)

__all__ = [
    "emit_reward",
    "find_final_reward",
    "find_reward_spans",
    "get_reward_value",
    "get_rewards_from_span",
    "is_reward_span",
    "reward",
]


class _CallableRewardModule(types.ModuleType):
    """This module, callable as the ``reward`` decorator (importing it sets ``agl_core.reward`` to it)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return reward(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableRewardModule
warnings.warn("agl_core.reward is deprecated. Please use agl_core.emitter instead.", stacklevel=2)
