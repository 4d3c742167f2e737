"""Compatibility module for Agent Lightning 0.3's ``agentlightning.instrumentation.weave``.

Listed in docs/migrating-from-agent-lightning.md. The implementation lives in the agl-weave plugin
(`agl_weave.instrumentation`, ``pip install agl-weave``): an in-process Weave trace server and the patch
that makes ``weave.init`` use it, fully offline. ``WeaveTracer`` applies it by itself; call these only
when you drive Weave without that tracer.
"""

from __future__ import annotations

from typing import Any

from agl_core._compat import import_required, module_getattr

__all__ = ["InMemoryWeaveTraceServer", "instrument_weave", "uninstrument_weave"]  # noqa: F822

_MODULE = "agl_weave.instrumentation"


def _from_plugin(name: str) -> Any:
    return lambda: getattr(import_required(_MODULE, name, "agl-weave"), name)


_NAMES: dict[str, Any] = {name: _from_plugin(name) for name in __all__}

__getattr__ = module_getattr("agl_core.instrumentation.weave", _NAMES)
