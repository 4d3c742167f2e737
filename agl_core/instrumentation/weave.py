"""Compatibility module for Agent Lightning 0.3's ``agentlightning.instrumentation.weave``.

Listed in docs/migrating-from-agent-lightning.md. The implementation lives in the agl-weave plugin
(`agl_weave.instrumentation`, ``pip install agl-weave``): an in-process Weave trace server and the patch
that makes ``weave.init`` use it, fully offline. ``WeaveTracer`` applies it by itself; call these only
when you drive Weave without that tracer.
"""

from agl_core._compat import plugin_module

__all__ = ["InMemoryWeaveTraceServer", "instrument_weave", "uninstrument_weave"]  # noqa: F822

__getattr__ = plugin_module(__name__, "agl_weave.instrumentation", "agl-weave")
