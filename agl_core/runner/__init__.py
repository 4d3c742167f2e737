"""Runners: execute agents on rollouts from a store (`Runner`, `LitAgentRunner`)."""

from agl_core.runner.agent import (
    AgentTimeoutError,
    LitAgentRunner,
    ResourcesNotFoundError,
    RunnerStoppedError,
)
from agl_core.runner.base import Runner
from agl_core.runner.heartbeat import HeartbeatSender

__all__ = [
    "AgentTimeoutError",
    "HeartbeatSender",
    "LitAgentRunner",
    "ResourcesNotFoundError",
    "Runner",
    "RunnerStoppedError",
]


def __getattr__(name: str) -> object:
    # Agent Lightning 0.3's deprecated LegacyAgentRunner: raises an error naming the replacement
    # (docs/migrating-from-agent-lightning.md).
    if name == "LegacyAgentRunner":
        from agl_core.runner import legacy

        return getattr(legacy, name)
    raise AttributeError(f"module 'agl_core.runner' has no attribute {name!r}")
