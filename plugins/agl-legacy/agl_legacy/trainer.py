"""Compatibility module for Agent Lightning 0.3's ``agentlightning.trainer.legacy``.

Listed in docs/migrating-from-agent-lightning.md. `TrainerLegacy` is 0.3's trainer of the deprecated v0.1
stack: ``fit_v0`` connects to an `AgentLightningServer` (a URL or an `AgentLightningClient`, or a
`DevTaskLoader` with ``dev=True``) and runs ``n_workers`` `LegacyAgentRunner` loops, in this process for one
worker or in worker processes otherwise. New code uses ``Trainer.fit()`` with a `LightningStore`.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import warnings
from typing import TYPE_CHECKING, Any, cast

from agl_core.types import ParallelWorkerBase

if TYPE_CHECKING:
    from agl_core.algorithm.base import Algorithm
    from agl_core.litagent import LitAgent
    from agl_core.tracer.base import Tracer
    from agl_core.types import Dataset
    from agl_legacy.client import AgentLightningClient

__all__ = ["TrainerLegacy"]

# named by its 0.3 path, so logging set up for agl_core (or agentlightning) covers it
logger = logging.getLogger("agl_core.trainer.legacy")

_WORKER_PREFIX = "AgentLightning-Worker-"
_JOIN_TIMEOUT_S = 10.0


class TrainerLegacy(ParallelWorkerBase):
    """Runs a `LitAgent` against a v0.1 server with `LegacyAgentRunner` workers (``fit_v0``).

    Keyword arguments (all optional): ``dev`` (use ``dev_data`` as the backend), ``algorithm``, ``tracer``
    (default `OtelTracer`), ``n_workers`` (default 1), ``max_tasks`` per worker (None: until stopped),
    ``daemon`` (worker processes are daemons and the trainer waits for them; default True) and
    ``triplet_exporter`` (default `TracerTraceToTriplet`).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        from agl_core.adapter.triplet import TracerTraceToTriplet
        from agl_core.tracer.otel import OtelTracer

        super().__init__()
        self._dev: bool = bool(kwargs.pop("dev", False))
        self.algorithm: Algorithm | None = kwargs.pop("algorithm", None)
        self.tracer: Tracer = kwargs.pop("tracer", None) or OtelTracer()
        self.n_workers: int = kwargs.pop("n_workers", None) or 1
        self.max_tasks: int | None = kwargs.pop("max_tasks", None)
        self.daemon: bool = kwargs.pop("daemon", True)
        self.triplet_exporter: Any = kwargs.pop("triplet_exporter", None) or TracerTraceToTriplet()
        self._client: AgentLightningClient | None = None
        self.owner: Any = self
        """What agents and the algorithm see as their trainer (the `Trainer` of `for_trainer`)."""

    @classmethod
    def for_trainer(cls, trainer: Any) -> TrainerLegacy:
        """The v0.1 trainer of an agl `Trainer` (its ``fit_v0``): same tracer, algorithm, limits, adapter."""
        legacy = cls(
            dev=trainer._dev,
            algorithm=trainer.algorithm,
            tracer=trainer.tracer,
            n_workers=trainer.n_runners,
            max_tasks=trainer.max_rollouts,
            daemon=trainer.daemon,
            triplet_exporter=trainer.adapter,
        )
        legacy.owner = trainer
        return legacy

    # ------------------------------------------------------------------ backend

    @staticmethod
    def _client_from(data: Any) -> AgentLightningClient | None:
        from agl_legacy.client import AgentLightningClient

        if isinstance(data, str):
            if not data.startswith(("http://", "https://")):
                raise ValueError("String data must be a valid URL starting with http:// or https://")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)  # 0.3 built it without warning
                return AgentLightningClient(endpoint=data)
        return data if isinstance(data, AgentLightningClient) else None

    def _backend(self, train_data: Any, dev_data: Any) -> AgentLightningClient:
        if self._dev:
            if dev_data is None:
                raise ValueError("dev_data must be provided when dev=True.")
            client = self._client_from(dev_data)
            if client is None:
                raise ValueError("dev_data must be a string URL or AgentLightningClient when dev=True.")
            return client
        client = self._client_from(train_data)
        if client is not None:
            return client
        if self.algorithm is None:
            raise ValueError(
                "train_data must be a string URL or AgentLightningClient when no algorithm is provided."
            )
        provided: AgentLightningClient = self.algorithm.get_client()
        return provided

    def init(self, backend: str | AgentLightningClient) -> None:
        """Connect to ``backend`` (a URL or a client) and set up the tracer."""
        client = self._client_from(backend)
        if client is None:
            raise ValueError("backend must be a string URL or an AgentLightningClient instance.")
        if self._client is None:
            self._client = client
        self.tracer.init()

    def teardown(self) -> None:
        """Tear the tracer down and forget the client."""
        self.tracer.teardown()
        self._client = None

    def client(self) -> AgentLightningClient:
        """The connected client; `RuntimeError` before `init`."""
        if self._client is None:
            raise RuntimeError("AgentLightningClient has not been initialized. Call `init` first.")
        return self._client

    # ------------------------------------------------------------------ workers

    def _worker_main_loop(self, agent: LitAgent[Any], worker_id: int, is_async: bool) -> int:
        """Run one `LegacyAgentRunner` worker until ``max_tasks``; returns the tasks processed."""
        from agl_core.adapter.triplet import TracerTraceToTriplet
        from agl_legacy.runner import LegacyAgentRunner

        agent.set_trainer(self.owner)
        if not isinstance(self.triplet_exporter, TracerTraceToTriplet):
            raise ValueError("triplet_exporter must be a TracerTraceToTriplet for the legacy trainer.")
        if agent.trained_agents:
            self.triplet_exporter.agent_match = agent.trained_agents
        self.tracer.init_worker(worker_id)
        processed = 0
        try:
            runner = LegacyAgentRunner(
                agent=agent,
                client=self.client(),
                tracer=self.tracer,
                triplet_exporter=self.triplet_exporter,
                max_tasks=self.max_tasks,
                worker_id=worker_id,
            )
            runner.init_worker(worker_id)
            processed = asyncio.run(runner.iter_async()) if is_async else runner.iter()
        except Exception:
            logger.exception("[Worker %d] Unhandled exception in worker loop.", worker_id)
        finally:
            self.tracer.teardown_worker(worker_id)
        return processed

    @staticmethod
    def kill_orphaned_processes() -> None:
        """Kill leftover worker processes of earlier runs (``AgentLightning-Worker-*``; needs psutil)."""
        import psutil

        for proc in psutil.process_iter():
            if proc.name().startswith(_WORKER_PREFIX):
                proc.kill()

    @staticmethod
    def _terminate(processes: list[multiprocessing.Process]) -> None:
        for process in processes:
            if process.is_alive():
                process.terminate()
        for process in processes:
            process.join(timeout=_JOIN_TIMEOUT_S)
            if process.is_alive():
                process.kill()
                process.join(timeout=_JOIN_TIMEOUT_S)

    def fit_v0(
        self,
        agent: LitAgent[Any],
        train_data: str | AgentLightningClient | Dataset[Any],
        *,
        val_data: str | AgentLightningClient | Dataset[Any] | None = None,
        dev_data: str | AgentLightningClient | Dataset[Any] | None = None,
        dev_backend: str | AgentLightningClient | None = None,
    ) -> None:
        """Run the agent's workers against the backend named by the data (see the class docstring).

        A URL or client as ``train_data`` (or ``dev_data`` with ``dev=True``) is the server; a dataset goes to
        the algorithm, which then provides the client (``algorithm.get_client()``) and runs after (one
        worker) or alongside (several workers) the workers.
        """
        if dev_backend is not None:
            warnings.warn("dev_backend is deprecated. Use dev_data instead.", stacklevel=2)
            if dev_data is not None:
                raise ValueError("dev_data and dev_backend cannot be provided at the same time.")
            dev_data = dev_backend
        train_dataset = cast(
            "Dataset[Any] | None",
            None if isinstance(train_data, str) or self._client_from(train_data) else train_data,
        )
        val_dataset = cast(
            "Dataset[Any] | None",
            None
            if val_data is None or isinstance(val_data, str) or self._client_from(val_data)
            else val_data,
        )
        if self.algorithm is not None:
            self.algorithm.set_trainer(self.owner)
        self.init(self._backend(train_data, dev_data))
        processes: list[multiprocessing.Process] = []
        is_async = agent.is_async()
        try:
            if self.n_workers == 1:
                processed = self._worker_main_loop(agent, 0, is_async)
                logger.info("Single worker mode finished. Tasks processed: %d", processed)
                if self.algorithm is not None and train_dataset is not None:
                    self.algorithm.run(train_dataset=train_dataset, val_dataset=val_dataset)
                return
            for worker_id in range(self.n_workers):
                process = multiprocessing.Process(
                    target=self._worker_main_loop,
                    args=(agent, worker_id, is_async),
                    daemon=self.daemon,
                    name=f"{_WORKER_PREFIX}{worker_id}",
                )
                processes.append(process)
                process.start()
            if self.algorithm is not None:
                self.algorithm.run(train_dataset=train_dataset, val_dataset=val_dataset)
                self._terminate(processes)
            elif self.daemon:
                for process in processes:
                    process.join()
                    if process.exitcode not in (0, None):
                        logger.warning("Worker %s exited with code %s.", process.name, process.exitcode)
        except BaseException:
            self._terminate(processes)
            raise
        finally:
            if self.daemon:
                self.teardown()
