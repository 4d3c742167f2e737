"""Agents: the `LitAgent` base class and the decorators that turn functions into agents."""

from agl_core.litagent.decorator import FunctionalLitAgent, llm_rollout, prompt_rollout, rollout
from agl_core.litagent.errors import AgentSignatureError, MissingResourceError
from agl_core.litagent.litagent import LitAgent

__all__ = [
    "AgentSignatureError",
    "FunctionalLitAgent",
    "LitAgent",
    "MissingResourceError",
    "llm_rollout",
    "prompt_rollout",
    "rollout",
]
