"""Agent Lightning 0.3's ``agentlightning.instrumentation.agentops_langchain``.

Served at ``agl_core.instrumentation.agentops_langchain``; listed in
docs/migrating-from-agent-lightning.md. AgentOps' LangChain callback handler names a chain span from
``serialized["name"]`` and ``serialized["id"]``, which LangGraph leaves empty (it passes them as
``name=``/``run_id=`` keyword arguments instead). `instrument_agentops_langchain` fills them in from
those arguments and turns off AgentOps' own LangGraph instrumentation so every chain is recorded once,
through the callback handler. Needs AgentOps (``pip install agl-agentops``).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

from agl_core._compat import import_required

__all__ = ["instrument_agentops_langchain", "uninstrument_agentops_langchain"]

_lock = threading.Lock()
_original_on_chain_start: Callable[..., Any] | None = None
_removed_langgraph_entry: Any = None


def _handler_class() -> Any:
    module = import_required(
        "agentops.integration.callbacks.langchain", "instrument_agentops_langchain", "agl-agentops"
    )
    return module.LangchainCallbackHandler


def _named_chain_start(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def on_chain_start(self: Any, serialized: dict[str, Any] | None, inputs: Any, **kwargs: Any) -> Any:
        if "name" in kwargs or "run_id" in kwargs:
            serialized = dict(serialized or {})
            if "name" in kwargs:
                serialized["name"] = kwargs["name"]
            if "run_id" in kwargs:
                serialized.setdefault("id", kwargs["run_id"])
        return original(self, serialized, inputs, **kwargs)

    return on_chain_start


def instrument_agentops_langchain() -> None:
    """Name LangGraph chain spans in AgentOps' LangChain handler; idempotent."""
    global _original_on_chain_start, _removed_langgraph_entry
    handler = _handler_class()
    instrumentation = import_required(
        "agentops.instrumentation", "instrument_agentops_langchain", "agl-agentops"
    )
    with _lock:
        if _original_on_chain_start is not None:
            return
        _original_on_chain_start = handler.on_chain_start
        handler.on_chain_start = _named_chain_start(handler.on_chain_start)
        _removed_langgraph_entry = instrumentation.AGENTIC_LIBRARIES.pop("langgraph", None)


def uninstrument_agentops_langchain() -> None:
    """Restore AgentOps' LangChain handler and LangGraph instrumentation; a no-op if not applied."""
    global _original_on_chain_start, _removed_langgraph_entry
    with _lock:
        if _original_on_chain_start is None:
            return
        _handler_class().on_chain_start = _original_on_chain_start
        _original_on_chain_start = None
        if _removed_langgraph_entry is not None:
            instrumentation = import_required(
                "agentops.instrumentation", "uninstrument_agentops_langchain", "agl-agentops"
            )
            instrumentation.AGENTIC_LIBRARIES["langgraph"] = _removed_langgraph_entry
            _removed_langgraph_entry = None
