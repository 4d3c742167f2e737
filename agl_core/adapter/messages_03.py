"""Compatibility module: Agent Lightning 0.3's helpers of ``agentlightning.adapter.messages``.

`convert_to_openai_messages` and `group_genai_dict` (re-exported by `agl_core.adapter.messages`), provided
by the agl-legacy plugin (``pip install agl-legacy``); listed in docs/migrating-from-agent-lightning.md.
"""

from agl_core._compat import plugin_module

__getattr__ = plugin_module(__name__, "agl_legacy.messages")
