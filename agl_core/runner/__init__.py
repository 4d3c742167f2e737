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
