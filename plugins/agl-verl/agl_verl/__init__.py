"""agl-verl: reinforcement learning on GPUs with verl, vLLM and Ray, fed by agl agents and the agl store.

Importing this package is cheap; verl, torch and Ray load only when training or batch building starts.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING

from agl_core.utils.lazy import lazy_exports
from agl_verl.config import VerlConfig, VerlConfigError

if TYPE_CHECKING:
    from agl_verl.algorithm import VERL

try:
    __version__ = version("agl-verl")
except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
    __version__ = "0.0.0"

__all__ = ["VERL", "VerlConfig", "VerlConfigError", "__version__"]

__getattr__, __dir__ = lazy_exports(__name__, {"VERL": "agl_verl.algorithm"})
