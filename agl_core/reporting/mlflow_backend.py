"""``mlflow``: one MLflow run per training run (``pip install 'agl-core[mlflow]'``).

The tracking server is ``$MLFLOW_TRACKING_URI`` when set (a tracking server, or ``sqlite:///...`` with the
full ``mlflow`` package), else a file store in ``<run_dir>/mlruns``: ``mlflow-skinny`` has no SQL store,
and MLflow >= 3.7 refuses file stores unless ``MLFLOW_ALLOW_FILE_STORE=true``, which this reporter then
sets (when unset) for the process. The experiment is ``$MLFLOW_EXPERIMENT_NAME`` or ``agl``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agl_core.reporting.base import import_tracker, scalar_metrics

__all__ = ["MlflowReporter"]

_DEFAULT_EXPERIMENT = "agl"


class MlflowReporter:
    """Logs numeric metrics with their step to one MLflow run through ``MlflowClient`` (no global run).

    ``config`` becomes the run's params (values turned into strings). `close` marks the run finished.
    """

    def __init__(self, run_dir: Path, *, run_name: str = "", config: Mapping[str, Any] | None = None) -> None:
        import_tracker("mlflow", "mlflow")
        from mlflow.entities import Metric, Param
        from mlflow.tracking import MlflowClient

        self._metric = Metric
        uri = os.environ.get("MLFLOW_TRACKING_URI")
        if not uri:
            uri = (Path(run_dir) / "mlruns").resolve().as_uri()
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        self.client = MlflowClient(tracking_uri=uri)
        name = os.environ.get("MLFLOW_EXPERIMENT_NAME") or _DEFAULT_EXPERIMENT
        experiment = self.client.get_experiment_by_name(name)
        experiment_id = experiment.experiment_id if experiment else self.client.create_experiment(name)
        self.run_id: str = self.client.create_run(experiment_id, run_name=run_name or None).info.run_id
        params = [Param(str(k), str(v)[:6000]) for k, v in (config or {}).items()]
        if params:
            self.client.log_batch(self.run_id, params=params)

    def log(self, step: int, metrics: Mapping[str, Any]) -> None:
        """Log every numeric metric of the step in one batch."""
        now = int(time.time() * 1000)
        batch = [self._metric(k, v, now, step) for k, v in scalar_metrics(metrics).items()]
        if batch:
            self.client.log_batch(self.run_id, metrics=batch)

    def close(self) -> None:
        """Mark the run finished."""
        self.client.set_terminated(self.run_id)
