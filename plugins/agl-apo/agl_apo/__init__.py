"""agl-apo: automatic prompt optimization (APO) for agl.

``from agl_apo import APO`` (or ``agl_core.APO`` / ``Trainer(algorithm="apo")``). Names are imported on
first access, so loading the plugin's entry point stays cheap.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING

from agl_core.utils.lazy import lazy_exports

try:
    __version__ = version("agl-apo")  # one source: agl_core/__init__.py, through the build metadata
except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
    __version__ = "0.0.0"

_LAZY: dict[str, str] = {
    "APO": "agl_apo.algorithm",
    "APOConfigError": "agl_apo.algorithm",
    "APOReport": "agl_apo.report",
    "APORunState": "agl_apo.state",
    "APOStateError": "agl_apo.state",
    "CandidateRecord": "agl_apo.state",
    "RoundRecord": "agl_apo.state",
    "load_run_state": "agl_apo.state",
    "OptimizerConfigError": "agl_apo.optimizer",
    "OptimizerError": "agl_apo.optimizer",
    "OptimizerLLM": "agl_apo.optimizer",
    "OptimizerUnreachableError": "agl_apo.optimizer",
}

__all__ = ["__version__", *sorted(_LAZY)]

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from agl_apo.algorithm import APO, APOConfigError  # noqa: F401
    from agl_apo.optimizer import (  # noqa: F401
        OptimizerConfigError,
        OptimizerError,
        OptimizerLLM,
        OptimizerUnreachableError,
    )
    from agl_apo.report import APOReport  # noqa: F401
    from agl_apo.state import APORunState, APOStateError, CandidateRecord, RoundRecord, load_run_state  # noqa: F401
