"""``tensorboard``: scalars in TensorBoard event files under ``<run_dir>/tensorboard`` (``pip install
'agl-core[tensorboard]'``; no TensorFlow or PyTorch needed)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agl_core.reporting.base import import_tracker, scalar_metrics

__all__ = ["TensorBoardReporter"]


class TensorBoardReporter:
    """Writes each numeric metric as a TensorBoard scalar (tag = metric name) at its step.

    Uses the ``tensorboard`` package's own event-file writer and protos; view with
    ``tensorboard --logdir <run_dir>/tensorboard``.
    """

    def __init__(self, run_dir: Path, *, run_name: str = "", config: Mapping[str, Any] | None = None) -> None:
        import_tracker("tensorboard", "tensorboard")
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.compat.proto.summary_pb2 import Summary
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        self.log_dir = Path(run_dir) / "tensorboard"
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._event = Event
        self._summary = Summary
        self._writer = EventFileWriter(str(self.log_dir))

    def log(self, step: int, metrics: Mapping[str, Any]) -> None:
        """Write one event holding every numeric metric of the step, then flush."""
        values = [self._summary.Value(tag=k, simple_value=v) for k, v in scalar_metrics(metrics).items()]
        if not values:
            return
        event = self._event(wall_time=time.time(), step=step, summary=self._summary(value=values))
        self._writer.add_event(event)
        self._writer.flush()

    def close(self) -> None:
        """Flush and close the event file."""
        self._writer.close()
