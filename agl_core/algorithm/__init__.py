"""Algorithms: the `Algorithm` base, `@algo`, `FastAlgorithm`, `Baseline` and helpers for writing them."""

from agl_core.algorithm.base import Algorithm
from agl_core.algorithm.baseline import Baseline, BaselineSummary
from agl_core.algorithm.decorator import FunctionalAlgorithm, algo
from agl_core.algorithm.fast import FastAlgorithm
from agl_core.algorithm.utils import batch_iter_over_dataset, with_llm_proxy, with_store

__all__ = [
    "Algorithm",
    "Baseline",
    "BaselineSummary",
    "FastAlgorithm",
    "FunctionalAlgorithm",
    "algo",
    "batch_iter_over_dataset",
    "with_llm_proxy",
    "with_store",
]

# Agent Lightning 0.3 compatibility: APO and VERL live in plugins; these factories load them when called
# (docs/migrating-from-agent-lightning.md).
from typing import Any

from agl_core._compat import PluginName as _PluginName


def APO(*args: Any, **kwargs: Any) -> Any:
    """Build agl-apo's ``APO`` (``pip install agl-apo``); arguments go to its constructor."""
    return _PluginName("algorithm", "apo", "agl-apo").load("APO")(*args, **kwargs)


def VERL(*args: Any, **kwargs: Any) -> Any:
    """Build agl-verl's ``VERL`` (``pip install agl-verl``); arguments go to its constructor."""
    return _PluginName("algorithm", "verl", "agl-verl").load("VERL")(*args, **kwargs)


__all__ += ["APO", "VERL"]
