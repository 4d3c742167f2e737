"""agl-unsloth: iterated supervised fine-tuning (LoRA) of the served model on its own best rollouts.

``agl_unsloth.SFT`` is the algorithm (registry name ``sft``, alias ``unsloth``);
``agl_unsloth.testing.build_tiny_model`` builds a tiny local model for tests and smoke runs.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING

from agl_core.utils.lazy import lazy_exports

try:
    __version__ = version("agl-unsloth")  # one source: agl_core/__init__.py, through the build metadata
except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
    __version__ = "0.0.0"

__all__ = ["SFT", "__version__"]

if TYPE_CHECKING:
    from agl_unsloth.algorithm import SFT

__getattr__, __dir__ = lazy_exports(__name__, {"SFT": "agl_unsloth.algorithm"})
