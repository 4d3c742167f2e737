"""Instrumentation of LLM client libraries so agent code is traced without changes.

:func:`agl_core.instrumentation.openai.instrument_openai` covers the ``openai`` client (needs the
``agl-core[openai]`` extra). ``OtelTracer.init_worker`` calls it automatically when ``openai`` is installed.

Agent Lightning 0.3's per-library modules are here too (``agentops``, ``agentops_langchain``, ``litellm``,
``vllm``, ``weave``; see docs/migrating-from-agent-lightning.md), with its ``*_INSTALLED`` flags: whether the
library each one needs can be imported (read on first access). As in 0.3, ``VLLM_INSTALLED`` and
``WEAVE_INSTALLED`` are always False.
"""

from __future__ import annotations

import importlib.util
import logging

__all__ = ["instrument_all", "uninstrument_all"]

logger = logging.getLogger(__name__)

# 0.3's availability flags: flag -> the modules its instrumentation imports (None: always False in 0.3).
_INSTALLED_FLAGS: dict[str, tuple[str, ...] | None] = {
    "AGENTOPS_INSTALLED": ("agl_agentops",),
    "AGENTOPS_LANGCHAIN_INSTALLED": ("agentops", "langchain_core"),
    "LITELLM_INSTALLED": ("litellm",),
    "VLLM_INSTALLED": None,
    "WEAVE_INSTALLED": None,
}


def __getattr__(name: str) -> bool:
    if name not in _INSTALLED_FLAGS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    modules = _INSTALLED_FLAGS[name]
    value = modules is not None and all(importlib.util.find_spec(module) is not None for module in modules)
    globals()[name] = value
    return value


def instrument_all(*, warn_missing: bool = True) -> list[str]:
    """Apply each instrumentation whose library is installed; return those applied.

    A library that is not installed is logged as a warning (``warn_missing``) or at debug level; one that
    is installed but cannot be instrumented is always a warning.
    """
    applied: list[str] = []
    if importlib.util.find_spec("openai") is None:
        logger.log(
            logging.WARNING if warn_missing else logging.DEBUG,
            "openai is not installed; its calls will not be traced.",
        )
    else:
        from agl_core.instrumentation.openai import instrument_openai

        try:
            instrument_openai()
            applied.append("openai")
        except ImportError as exc:
            logger.warning("openai calls will not be traced: %s", exc)
    return applied


def uninstrument_all() -> None:
    """Undo :func:`instrument_all`."""
    if importlib.util.find_spec("openai") is not None:
        from agl_core.instrumentation.openai import is_openai_instrumented, uninstrument_openai

        if is_openai_instrumented():
            uninstrument_openai()
