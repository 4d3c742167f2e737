"""Errors raised when an agent function has an unusable signature or asks for a missing resource."""

from __future__ import annotations

from agl_core.errors import AglError

__all__ = ["AgentSignatureError", "MissingResourceError"]


class AgentSignatureError(AglError, ValueError, NotImplementedError):
    """A function decorated as an agent does not have a signature agl can call.

    It is a ``ValueError`` (what ``@llm_rollout``/``@prompt_rollout`` raised in Agent Lightning 0.3) and a
    ``NotImplementedError`` (what ``@rollout`` raised), so code written for either keeps working. The
    message shows the signature that is expected.
    """


class MissingResourceError(AglError, ValueError):
    """An agent asks for a resource (an LLM, a prompt template) that the rollout's resources lack."""
