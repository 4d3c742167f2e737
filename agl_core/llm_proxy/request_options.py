"""Per-proxy request handling options: hosted tools, volatile system-prompt lines, harness side calls.

* **Hosted tools** (Responses ``web_search`` ...) cannot run behind a chat-completions backend: they are
  dropped and listed on the span (``agl.llm.request.dropped``), or refused with a 400
  (``refuse_hosted_tools``).
* **Volatile lines**: some harnesses put a line that changes per session or version at the top of a long
  system prompt (Claude Code's ``x-anthropic-billing-header: ...`` line), which changes the prompt's
  first tokens and defeats prefix caching across rollouts. ``strip_system_lines`` removes whole lines
  matching any of the given patterns from system messages before the request goes to the backend (and
  is recorded); :data:`KNOWN_VOLATILE_LINES` lists the known ones.
* **Side calls**: harnesses make calls that are not the agent's turns (Claude Code titles a session with
  an extra call to its small model). Requests whose model matches one of ``side_call_models`` (shell-style
  patterns such as ``*haiku*``) are side calls: ``side_calls="mark"`` (the default) records them with
  ``agl.llm.side_call`` set to the pattern, so training data builders can skip them; ``"drop"``
  forwards them without recording. ``agl doctor`` also counts the distinct conversations of a rollout,
  which shows side calls no pattern caught.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["KNOWN_VOLATILE_LINES", "RequestOptions", "SideCallMode"]

SideCallMode = Literal["mark", "drop"]
"""What the proxy does with a recognized harness side call."""

KNOWN_VOLATILE_LINES: Mapping[str, str] = {
    "claude-code-billing-header": r"x-anthropic-billing-header: .*",
}
"""Name -> regular expression of a whole system-prompt line known to change per session or version."""


@dataclass(frozen=True)
class RequestOptions:
    """How the proxy treats requests beyond forwarding them (see the module docstring)."""

    refuse_hosted_tools: bool = False
    strip_system_lines: Sequence[str] = ()
    side_call_models: Sequence[str] = ()
    side_calls: SideCallMode = "mark"
    _strip: re.Pattern[str] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        """Compile the line patterns.

        Raises:
            ValueError: for an invalid pattern or side-call mode.
        """
        if self.side_calls not in ("mark", "drop"):
            raise ValueError(f"side_calls must be 'mark' or 'drop', got {self.side_calls!r}.")
        if self.strip_system_lines:
            try:
                joined = "|".join(f"(?:{p})" for p in self.strip_system_lines)
                object.__setattr__(self, "_strip", re.compile(rf"^(?:{joined})[ \t]*(?:\r?\n|$)", re.M))
            except re.error as exc:
                raise ValueError(f"strip_system_lines has an invalid regular expression: {exc}") from None

    def side_call(self, request: Mapping[str, Any] | None) -> str | None:
        """The ``side_call_models`` pattern the request's model matches, or None."""
        model = request.get("model") if request is not None else None
        if not isinstance(model, str):
            return None
        for pattern in self.side_call_models:
            if fnmatch.fnmatchcase(model, pattern):
                return pattern
        return None

    def apply(self, chat: dict[str, Any]) -> dict[str, Any]:
        """``chat`` with volatile system lines removed (a new dict when something changed)."""
        strip = self._strip
        messages = chat.get("messages")
        if strip is None or not isinstance(messages, list):
            return chat
        changed = False
        out = []
        for message in messages:
            if isinstance(message, dict) and message.get("role") == "system":
                content = message.get("content")
                if isinstance(content, str):
                    stripped = strip.sub("", content)
                    if stripped != content:
                        message, changed = {**message, "content": stripped}, True
                elif isinstance(content, list):
                    parts = [
                        {**p, "text": strip.sub("", p["text"])}
                        if isinstance(p, dict) and isinstance(p.get("text"), str)
                        else p
                        for p in content
                    ]
                    if parts != content:
                        message, changed = {**message, "content": parts}, True
            out.append(message)
        return {**chat, "messages": out} if changed else chat
