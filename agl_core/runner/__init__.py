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

# Agent Lightning 0.3 compatibility: its deprecated LegacyAgentRunner
# (docs/migrating-from-agent-lightning.md).
from agl_core.runner.legacy import __getattr__ as __getattr__
