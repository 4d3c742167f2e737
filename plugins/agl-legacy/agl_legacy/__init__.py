"""agl-legacy: Agent Lightning 0.3's machinery that agl itself does not use, at 0.3's import paths.

The deprecated v0.1 stack (`AgentLightningClient`, `AgentLightningServer`, `DevTaskLoader`,
`LegacyAgentRunner`, `TrainerLegacy`), the collection-based store and its in-memory and MongoDB collections,
0.3's metrics backends, `PythonServerLauncher`, the OTLP helpers, 0.3's helpers only 0.3 code calls
(``lightning_cli``, the message helpers, the LiteLLM/vLLM/AgentOps-LangChain instrumentation) and 0.3's
``agl`` command forms. Code imports them from their 0.3 paths under ``agl_core`` (``agl_core.client``,
``agl_core.store.collection``, ...): those compatibility modules resolve every name here. Importing this
package imports nothing else.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("agl-legacy")  # one source: agl_core/__init__.py, through the build metadata
except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
    __version__ = "0.0.0"

__all__ = ["__version__"]
