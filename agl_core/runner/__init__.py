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
    "LegacyAgentRunner",  # imported on first access by __getattr__
    "LitAgentRunner",
    "ResourcesNotFoundError",
    "Runner",
    "RunnerStoppedError",
]


def __getattr__(name: str) -> object:
    # Agent Lightning 0.3's runner of the deprecated v0.1 stack, imported on first use.
    if name == "LegacyAgentRunner":
        from agl_core.runner import legacy

        return getattr(legacy, name)
    raise AttributeError(f"module 'agl_core.runner' has no attribute {name!r}")
