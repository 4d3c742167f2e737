"""Runners: execute agents on rollouts from a store (`Runner`, `LitAgentRunner`)."""

from agl_core.runner.agent import (
    AgentTimeoutError,
    LitAgentRunner,
    ResourcesNotFoundError,
    RunnerStoppedError,
)
from agl_core.runner.base import Runner
from agl_core.runner.heartbeat import HeartbeatSender
from agl_core.utils.lazy import lazy_exports

__all__ = [
    "AgentTimeoutError",
    "HeartbeatSender",
    "LitAgentRunner",
    "ResourcesNotFoundError",
    "Runner",
    "RunnerStoppedError",
]


# Agent Lightning 0.3's runner of the deprecated v0.1 stack (agl-legacy's; not in __all__), on first use.
__getattr__, __dir__ = lazy_exports(__name__, {"LegacyAgentRunner": "agl_core.runner.legacy"})
