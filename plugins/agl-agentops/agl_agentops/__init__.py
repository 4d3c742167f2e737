"""agl-agentops: trace agents with the AgentOps SDK into the agl store (tracer ``"agentops"``).

Importing this package is cheap: the names below load ``agentops`` only when first used.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING

from agl_core.utils.lazy import lazy_exports

try:
    __version__ = version("agl-agentops")  # one source: agl_core/__init__.py, through the build metadata
except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
    __version__ = "0.0.0"

__all__ = [
    "AgentOpsExportStats",
    "AgentOpsTracer",
    "ExporterProbe",
    "__version__",
    "instrument_token_ids",
    "probe_agentops_exporter",
    "uninstrument_token_ids",
]

_LAZY = {
    "AgentOpsTracer": "agl_agentops.tracer",
    "AgentOpsExportStats": "agl_agentops.exporter",
    "ExporterProbe": "agl_agentops.compat",
    "probe_agentops_exporter": "agl_agentops.compat",
    "instrument_token_ids": "agl_agentops.token_ids",
    "uninstrument_token_ids": "agl_agentops.token_ids",
}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)


if TYPE_CHECKING:  # pragma: no cover
    from agl_agentops.compat import ExporterProbe, probe_agentops_exporter
    from agl_agentops.exporter import AgentOpsExportStats
    from agl_agentops.token_ids import instrument_token_ids, uninstrument_token_ids
    from agl_agentops.tracer import AgentOpsTracer
