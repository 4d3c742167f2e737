"""agl-verl: reinforcement learning on GPUs with verl, vLLM and Ray, fed by agl agents and the agl store.

Importing this package is cheap; verl, torch and Ray load only when training or batch building starts.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

from agl_verl.config import VerlConfig, VerlConfigError

if TYPE_CHECKING:
    from agl_verl.algorithm import VERL

try:
    __version__ = version("agl-verl")
except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
    __version__ = "0.0.0"

__all__ = ["VERL", "VerlConfig", "VerlConfigError", "__version__"]


def __getattr__(name: str) -> Any:
    if name == "VERL":
        from agl_verl.algorithm import VERL

        return VERL
    raise AttributeError(f"module 'agl_verl' has no attribute {name!r}")
