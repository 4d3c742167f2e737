"""The `MetricsReporter` protocol, the group that fans a step out to several, and the factory by name."""

from __future__ import annotations

import importlib
import logging
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "BACKENDS",
    "REPORTERS_ENV",
    "MetricsReporter",
    "ReporterGroup",
    "open_reporters",
    "reporter_names",
    "scalar_metrics",
]

logger = logging.getLogger(__name__)

REPORTERS_ENV = "AGL_REPORTERS"
"""Environment variable naming the reporters (comma-separated) when the code names none."""

BACKENDS: dict[str, str] = {
    "jsonl": "agl_core.reporting.jsonl_backend:JsonlReporter",
    "tensorboard": "agl_core.reporting.tensorboard_backend:TensorBoardReporter",
    "mlflow": "agl_core.reporting.mlflow_backend:MlflowReporter",
    "wandb": "agl_core.reporting.wandb_backend:WandbReporter",
}
"""Reporter name -> ``module:class``; the module is imported only when that reporter is opened."""


@runtime_checkable
class MetricsReporter(Protocol):
    """Receives one mapping of metrics per training step."""

    def log(self, step: int, metrics: Mapping[str, Any]) -> None:
        """Record the metrics of step `step` (values that are not numbers may be skipped)."""
        ...

    def close(self) -> None:
        """Flush and release everything; no `log` follows."""
        ...


def scalar_metrics(metrics: Mapping[str, Any]) -> dict[str, float]:
    """The finite real-number values of `metrics` (bools and ``None``/strings/containers left out)."""
    out: dict[str, float] = {}
    for key, value in metrics.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            out[str(key)] = float(value)
    return out


def reporter_names(names: Sequence[str] | str | None = None) -> list[str]:
    """`names` (a list or a comma-separated string), else ``$AGL_REPORTERS``, else ``["jsonl"]``.

    Names are stripped, lower-cased and deduplicated in order. Raises ValueError naming the known
    reporters when one is unknown.
    """
    if names is None:
        names = os.environ.get(REPORTERS_ENV) or "jsonl"
    items = names.split(",") if isinstance(names, str) else list(names)
    result: list[str] = []
    for item in items:
        name = item.strip().lower()
        if not name or name in result:
            continue
        if name not in BACKENDS:
            raise ValueError(
                f"Unknown metrics reporter {item.strip()!r}; choose from {', '.join(BACKENDS)} "
                f"(in reporters=[...] or {REPORTERS_ENV}=name,name)."
            )
        result.append(name)
    return result


class ReporterGroup:
    """Several reporters behind one `MetricsReporter`: each step goes to all of them.

    A reporter that fails in `log` is logged (once per reporter) and skipped for that step; training
    continues. `close` closes every reporter even when one fails.
    """

    def __init__(self, reporters: Mapping[str, MetricsReporter]) -> None:
        self.reporters = dict(reporters)
        self._warned: set[str] = set()

    def log(self, step: int, metrics: Mapping[str, Any]) -> None:
        """Send the metrics of step `step` to every reporter."""
        for name, reporter in self.reporters.items():
            try:
                reporter.log(step, metrics)
            except Exception:
                if name not in self._warned:
                    self._warned.add(name)
                    logger.warning("Metrics reporter %r failed at step %d", name, step, exc_info=True)

    def close(self) -> None:
        """Close every reporter."""
        for name, reporter in self.reporters.items():
            try:
                reporter.close()
            except Exception:
                logger.warning("Metrics reporter %r failed to close", name, exc_info=True)

    def __enter__(self) -> ReporterGroup:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def open_reporters(
    names: Sequence[str] | str | None = None,
    *,
    run_dir: str | Path,
    run_name: str | None = None,
    config: Mapping[str, Any] | None = None,
) -> ReporterGroup:
    """Open the reporters `names` (see `reporter_names`) for one run whose files live in `run_dir`.

    Args:
        names: Reporter names; None reads ``$AGL_REPORTERS`` (default ``jsonl``).
        run_dir: The run folder: ``metrics.jsonl``, TensorBoard event files (``tensorboard/``), the
            default MLflow file store (``mlruns/``) and W&B's ``wandb/`` folder go here.
        run_name: The run's name in trackers that show one (default: the folder's name).
        config: Hyper-parameters recorded once by trackers that keep them (MLflow params, W&B config).

    Raises:
        ValueError: An unknown name.
        ImportError: A tracker's library is missing; the message names the extra to install.
    """
    folder = Path(run_dir)
    opened: dict[str, MetricsReporter] = {}
    try:
        for name in reporter_names(names):
            module_name, _, class_name = BACKENDS[name].partition(":")
            cls = getattr(importlib.import_module(module_name), class_name)
            opened[name] = cls(folder, run_name=run_name or folder.resolve().name, config=dict(config or {}))
    except BaseException:
        ReporterGroup(opened).close()
        raise
    return ReporterGroup(opened)


def import_tracker(module: str, extra: str) -> Any:
    """Import a tracker's library, or raise ImportError saying which agl-core extra installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"The {extra!r} metrics reporter needs the {module!r} package: pip install 'agl-core[{extra}]' "
            f"(or drop {extra!r} from reporters / {REPORTERS_ENV})."
        ) from exc
