"""Instrumentation of LLM client libraries so agent code is traced without changes.

:func:`agl_core.instrumentation.openai.instrument_openai` covers the ``openai`` client (needs the
``agl-core[openai]`` extra). ``OtelTracer.init_worker`` calls it automatically when ``openai`` is installed.
"""

from __future__ import annotations

import importlib.util
import logging

__all__ = ["instrument_all", "uninstrument_all"]

logger = logging.getLogger(__name__)


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
