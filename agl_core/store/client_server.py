"""Compatibility module for Agent Lightning 0.3's ``agentlightning.store.client_server``.

``LightningStoreClient`` and ``LightningStoreServer`` are agl's own; 0.3's request models and
``CachedStaticFiles`` are provided by the agl-legacy plugin (``pip install agl-legacy``). Listed in
docs/migrating-from-agent-lightning.md.
"""

from agl_core._compat import plugin_module
from agl_core.store.http import LightningStoreClient, LightningStoreServer
from agl_core.types import Span as Span  # 0.3 code patches ``...client_server.Span.from_opentelemetry``

__all__ = ["LightningStoreClient", "LightningStoreServer"]

__getattr__ = plugin_module(__name__, "agl_legacy.client_server")
