"""Per-step metrics of training runs, sent to the experiment trackers people use.

An algorithm opens its reporters once per run and calls ``log(step, metrics)`` after each step::

    from agl_core.reporting import open_reporters

    reporters = open_reporters(["jsonl", "tensorboard"], run_dir="runs/demo")
    reporters.log(1, {"reward_mean": 0.4, "loss": 1.2})
    reporters.close()

Backends, chosen by name (or by ``AGL_REPORTERS=jsonl,tensorboard``): ``jsonl`` (``metrics.jsonl`` in
the run folder, no dependency), ``tensorboard``, ``mlflow`` and ``wandb``; each imports its library only
when opened and names the extra to install when it is missing (``pip install 'agl-core[tensorboard]'``).
See docs/metrics.md.

Algorithms that train models also share the on-screen progress table (:class:`ProgressTable`), the
JSONL reader (:func:`read_jsonl`) and the reward plot (:func:`plot_reward_curves`).
"""

from __future__ import annotations

from agl_core.reporting.base import (
    REPORTERS_ENV,
    MetricsReporter,
    ReporterGroup,
    open_reporters,
    reporter_names,
    scalar_metrics,
)
from agl_core.reporting.jsonl_backend import append_jsonl, read_jsonl
from agl_core.reporting.plots import RewardCurve, plot_reward_curves
from agl_core.reporting.progress import Column, ProgressTable, format_cell

__all__ = [
    "REPORTERS_ENV",
    "Column",
    "MetricsReporter",
    "ProgressTable",
    "ReporterGroup",
    "RewardCurve",
    "append_jsonl",
    "format_cell",
    "open_reporters",
    "plot_reward_curves",
    "read_jsonl",
    "reporter_names",
    "scalar_metrics",
]
