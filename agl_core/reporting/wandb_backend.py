"""``wandb``: one Weights & Biases run per training run (``pip install 'agl-core[wandb]'``).

W&B's own settings apply (``WANDB_MODE``, ``WANDB_PROJECT``, ``WANDB_API_KEY``...); with
``WANDB_MODE=offline`` the run is written under ``<run_dir>/wandb`` and can be uploaded later with
``wandb sync``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agl_core.reporting.base import import_tracker, scalar_metrics

__all__ = ["WandbReporter"]

_DEFAULT_PROJECT = "agl"


class WandbReporter:
    """Logs numeric metrics at their step to a W&B run (its files under ``<run_dir>/wandb``)."""

    def __init__(self, run_dir: Path, *, run_name: str = "", config: Mapping[str, Any] | None = None) -> None:
        wandb = import_tracker("wandb", "wandb")
        folder = Path(run_dir)
        folder.mkdir(parents=True, exist_ok=True)
        self.run = wandb.init(
            project=os.environ.get("WANDB_PROJECT") or _DEFAULT_PROJECT,
            name=run_name or None,
            dir=str(folder),
            config=dict(config or {}),
            reinit="create_new",
        )

    def log(self, step: int, metrics: Mapping[str, Any]) -> None:
        """Log every numeric metric of the step."""
        values = scalar_metrics(metrics)
        if values:
            self.run.log(values, step=step)

    def close(self) -> None:
        """Finish the run. W&B's background service completes the files (at the latest when the process
        exits, or at ``wandb.teardown()``)."""
        self.run.finish()
