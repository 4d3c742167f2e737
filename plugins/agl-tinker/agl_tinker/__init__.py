"""agl-tinker: RL training of agents through the Tinker training API (or a local CPU stand-in).

``agl_tinker.Tinker`` is the algorithm; ``agl_tinker.local`` the offline backend;
``agl_tinker.testing.build_tiny_model`` a from-scratch tiny model for tests and demos.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING

from agl_core.utils.lazy import lazy_exports

try:
    __version__ = version("agl-tinker")  # one source: agl_core/__init__.py, through the build metadata
except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
    __version__ = "0.0.0"

__all__ = ["Tinker", "__version__"]

if TYPE_CHECKING:
    from agl_tinker.algorithm import Tinker

__getattr__, __dir__ = lazy_exports(__name__, {"Tinker": "agl_tinker.algorithm"})
