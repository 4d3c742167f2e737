"""What one Responses or Messages translation changed: dropped request fields and renamed tools.

:func:`~agl_proxy_translate.responses.responses_to_chat` and
:func:`~agl_proxy_translate.messages.messages_to_chat` fill a :class:`Translation` while they
build the chat request: every request field or item they could not carry to a chat-completions backend
is listed in :attr:`Translation.dropped` (recorded on the span as ``agl.llm.request.dropped``, never
dropped silently), and every tool they had to rename or reshape (a namespaced tool flattened to
``namespace__name``, a free-form ``custom`` tool carried as a function with one string argument) is kept
in :attr:`Translation.tools`, so the model's calls map back to what the client declared.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

__all__ = ["CUSTOM_INPUT", "NAMESPACE_SEPARATOR", "ToolOrigin", "Translation"]

NAMESPACE_SEPARATOR = "__"
"""Joins a namespace and a tool name into one chat function name (``collaboration__spawn_agent``)."""

CUSTOM_INPUT = "input"
"""The one string argument a free-form ``custom`` tool is carried with as a chat function."""


@dataclass(frozen=True)
class ToolOrigin:
    """How the client declared a tool the chat request carries under another name or shape."""

    kind: Literal["function", "custom"]
    """``custom``: a free-form tool whose input is one string (Responses ``custom`` tools)."""
    name: str
    """The tool's name as the client declared it (inside its namespace, if any)."""
    namespace: str | None = None
    """The Responses ``namespace`` tool that held it, or None."""


@dataclass
class Translation:
    """Notes a translation keeps about one request, and the options it follows.

    Args:
        refuse_hosted_tools: Answer 400 when the request declares a hosted tool (``web_search``, ...)
            instead of dropping it and listing it in :attr:`dropped`.
    """

    refuse_hosted_tools: bool = False
    dropped: list[str] = field(default_factory=list)
    """Request fields, items and tools not carried to the backend, as ``path`` or ``path: reason``."""
    tools: dict[str, ToolOrigin] = field(default_factory=dict)
    """Chat function name -> the tool as declared, for tools that were renamed or reshaped."""

    def drop(self, what: str) -> None:
        """Note that ``what`` (a field path, optionally with ``: reason``) was not carried over."""
        if what not in self.dropped:
            self.dropped.append(what)

    def chat_name(self, name: str, namespace: str | None, kind: Literal["function", "custom"]) -> str:
        """The chat function name for a tool; remembers the tool when the name or shape differs."""
        flat = f"{namespace}{NAMESPACE_SEPARATOR}{name}" if namespace else name
        if namespace or kind == "custom":
            self.tools[flat] = ToolOrigin(kind, name, namespace)
        return flat

    def origin(self, chat_name: str) -> ToolOrigin:
        """The tool a chat function name stands for (a plain function when it was not renamed)."""
        return self.tools.get(chat_name) or ToolOrigin("function", chat_name)
