"""agl-weave: W&B Weave calls recorded as spans in the agl store (tracer ``"weave"``), fully offline.

Importing this package is cheap: the names below load ``weave`` only when first used.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING

from agl_core.utils.lazy import lazy_exports

try:
    __version__ = version("agl-weave")  # one source: agl_core/__init__.py, through the build metadata
except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
    __version__ = "0.0.0"

__all__ = [
    "InMemoryWeaveTraceServer",
    "WeaveSpanRecordingContext",
    "WeaveTracer",
    "WeaveTracerManagedTraceServer",
    "__version__",
    "instrument_weave",
    "is_weave_instrumented",
    "uninstrument_weave",
]

_LAZY = {
    "InMemoryWeaveTraceServer": "agl_weave.server",
    "WeaveSpanRecordingContext": "agl_weave.recording",
    "WeaveTracer": "agl_weave.tracer",
    "WeaveTracerManagedTraceServer": "agl_weave.tracer",
    "instrument_weave": "agl_weave.instrumentation",
    "is_weave_instrumented": "agl_weave.instrumentation",
    "uninstrument_weave": "agl_weave.instrumentation",
}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)


if TYPE_CHECKING:  # pragma: no cover
    from agl_weave.instrumentation import instrument_weave, is_weave_instrumented, uninstrument_weave
    from agl_weave.recording import WeaveSpanRecordingContext
    from agl_weave.server import InMemoryWeaveTraceServer
    from agl_weave.tracer import WeaveTracer, WeaveTracerManagedTraceServer
