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
