"""Compatibility module for Agent Lightning 0.3's ``agentlightning.config``.

``lightning_cli`` (a command line built from classes' ``__init__`` signatures), provided by the
agl-legacy plugin (``pip install agl-legacy``); listed in docs/migrating-from-agent-lightning.md.
"""

from agl_core._compat import plugin_module

__getattr__ = plugin_module(__name__, "agl_legacy.config")
