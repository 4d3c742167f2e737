"""The trainer's algorithm and runner bundles: what an execution strategy runs on each side."""

from __future__ import annotations

import importlib
import importlib.util
import logging
from typing import TYPE_CHECKING, Any

from agl_core.execution.lifecycle import wait_for_event

if TYPE_CHECKING:
    from agl_core.algorithm.base import Algorithm
    from agl_core.execution.events import ExecutionEvent
    from agl_core.store.base import LightningStore
    from agl_core.trainer._workers import WorkerRunners
    from agl_core.trainer.trainer import Trainer
    from agl_core.types import Dataset

__all__ = ["TrainerAlgorithmBundle", "TrainerRunnerBundle"]

logger = logging.getLogger(__name__)

_NO_ALGORITHM_POLL_SECONDS = 0.1
_LLM_CLIENT_MODULES = (
    "openai",
    "agl_core.instrumentation.openai",
)


class TrainerAlgorithmBundle:
    """Wire the algorithm to the trainer's components and run it (sync or async), with progress."""

    def __init__(
        self,
        trainer: Trainer,
        algorithm: Algorithm | None,
        train_dataset: Dataset[Any] | None,
        val_dataset: Dataset[Any] | None,
    ) -> None:
        self.trainer = trainer
        self.algorithm = algorithm
        self.train_dataset = train_dataset
        self.val_dataset = val_dataset

    def _wire(self, algorithm: Algorithm, store: LightningStore) -> None:
        trainer = self.trainer
        algorithm.set_trainer(trainer)
        algorithm.set_store(store)
        algorithm.set_adapter(trainer.adapter)
        if trainer.initial_resources is not None:
            algorithm.set_initial_resources(trainer.initial_resources)
        if trainer.llm_proxy is not None:
            trainer.llm_proxy.set_store(store)
            algorithm.set_llm_proxy(trainer.llm_proxy)

    async def __call__(self, store: LightningStore, event: ExecutionEvent) -> None:
        """Run the algorithm against ``store``; without one, wait until ``event`` is set."""
        algorithm = self.algorithm
        reporter = None
        if self.trainer.progress:
            from agl_core.trainer.progress import ProgressReporter

            reporter = ProgressReporter(store)
            reporter.start()
        try:
            if algorithm is None:
                logger.info("No algorithm: the store is served until the run is stopped.")
                await wait_for_event(event, _NO_ALGORITHM_POLL_SECONDS)
                return
            self._wire(algorithm, store)
            if algorithm.is_async():
                await algorithm.run(train_dataset=self.train_dataset, val_dataset=self.val_dataset)  # type: ignore[misc]
            else:
                algorithm.run(train_dataset=self.train_dataset, val_dataset=self.val_dataset)
        except Exception:
            logger.exception("Algorithm %s failed.", type(algorithm).__name__)
            raise
        finally:
            if reporter is not None:
                await reporter.stop()


class TrainerRunnerBundle:
    """Run one worker: its own runner (see `WorkerRunners`) on the agent until the event is set."""

    def __init__(self, trainer: Trainer, agent: Any, runners: WorkerRunners[Any]) -> None:
        self.trainer: Trainer | None = trainer
        self.hooks = trainer.hooks
        self.agent = agent
        self.runners = runners

    def __getstate__(self) -> dict[str, Any]:
        """Picklable form for strategies that ship the bundle to other processes (Ray actors): no trainer."""
        return {**self.__dict__, "trainer": None}

    def prepare_fork(self) -> None:
        """Import, once in the parent, the modules every runner process would otherwise import on its own.

        Called by process strategies before they fork: the OpenTelemetry SDK and, when the tracer captures
        ``openai`` calls, ``openai`` and its instrumentation (about a second of CPU per process otherwise).
        """
        tracer = getattr(self.runners.template, "tracer", None)
        modules = [type(tracer).__module__] if tracer is not None else []
        if (
            getattr(tracer, "instrument_llm_clients", False)
            and importlib.util.find_spec("openai") is not None
        ):
            modules += list(_LLM_CLIENT_MODULES)
        for name in modules:
            try:
                importlib.import_module(name)
            except ImportError as exc:  # the runner reports it properly when it instruments
                logger.debug("Could not preload %s: %r", name, exc)

    async def __call__(self, store: LightningStore, worker_id: int, event: ExecutionEvent) -> None:
        """Init the runner for ``worker_id``, iterate until ``event``, tear down (errors logged)."""
        runner = self.runners.acquire()
        runner.init(agent=self.agent, hooks=self.hooks)
        try:
            runner.init_worker(worker_id, store)
            try:
                await runner.iter(event=event)
            finally:
                try:
                    runner.teardown_worker(worker_id)
                except Exception:
                    logger.exception(
                        "Runner %s: teardown_worker(%d) failed.", type(runner).__name__, worker_id
                    )
        finally:
            try:
                runner.teardown()
            except Exception:
                logger.exception("Runner %s: teardown() failed.", type(runner).__name__)
