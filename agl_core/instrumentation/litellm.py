"""Compatibility module for Agent Lightning 0.3's ``agentlightning.instrumentation.litellm``.

`instrument_litellm` (token ids on LiteLLM's OpenTelemetry spans), provided by the agl-legacy plugin
(``pip install agl-legacy``); listed in docs/migrating-from-agent-lightning.md.
"""

from agl_core._compat import plugin_module

__getattr__ = plugin_module(__name__, "agl_legacy.litellm")
