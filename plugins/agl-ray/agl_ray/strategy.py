"""`RayExecutionStrategy` (``"ray"``): the algorithm in the driver, every runner a Ray actor."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Literal

from agl_core.execution import AlgorithmBundle, ExecutionStrategy, RunnerBundle, ThreadingEvent

if TYPE_CHECKING:
    from agl_core.store import LightningStore
    from agl_ray.pool import RunnerActorPool

__all__ = ["RayExecutionStrategy", "actor_options"]

logger = logging.getLogger(__name__)

Role = Literal["both", "runner"]

_CPU_KEYS = ("CPU", "num_cpus")
_GPU_KEYS = ("GPU", "num_gpus")


def actor_options(runner_resources: Mapping[str, float] | None) -> dict[str, Any]:
    """Ray actor options from ``{"CPU": 1, "GPU": 0.5, "memory": bytes, "<custom>": n}``.

    ``num_cpus``/``num_gpus`` are accepted for CPU/GPU; every other key is a custom resource. The default
    is one CPU per runner.

    Raises:
        ValueError: a value that is not a number >= 0.
    """
    options: dict[str, Any] = {"num_cpus": 1}
    custom: dict[str, float] = {}
    for key, value in (runner_resources or {}).items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise ValueError(
                f"runner_resources[{key!r}] must be a number >= 0, got {value!r}; for example "
                '{"CPU": 1, "GPU": 0.5, "my_accelerator": 1}.'
            )
        if key in _CPU_KEYS:
            options["num_cpus"] = value
        elif key in _GPU_KEYS:
            options["num_gpus"] = value
        elif key == "memory":
            options["memory"] = value
        else:
            custom[key] = value
    if custom:
        options["resources"] = custom
    return options


class RayExecutionStrategy(ExecutionStrategy):
    """Runs the algorithm in this process (the Ray driver) and ``n_runners`` runners as Ray actors.

    The store: with ``store_uri`` every side opens that URI (``postgresql://``, ``mongodb://``, or the
    ``http://`` URL of an ``agl store serve``); an ``http`` store client is shared as is; any other store
    (``memory:``, SQLite) is served over HTTP by the driver on ``server_host:server_port`` (default: this
    node's Ray IP and a free port) for the actors.

    Actors are placed by Ray with ``runner_resources`` (``{"CPU": 1, "GPU": 1, "<custom>": 1}``) and
    ``runtime_env`` (Ray's runtime environment: ``env_vars``, ``working_dir``, ``pip``...). Each runs the
    runner bundle as worker ``Worker-<n>`` in the store.

    Faults: an actor that dies has its in-flight attempt marked ``failed`` at once (the store retries it
    per its ``RolloutConfig``) and is replaced, at most ``max_restarts`` times per run. An actor that cannot
    reach the store within ``connect_timeout`` seconds stops the run with a clear error. Ctrl-C stops every
    actor (``graceful_timeout`` for the current rollout, then cancelled, then killed), marks any attempt
    still active failed, and ``execute`` returns.

    `scale` changes the number of actors while the run goes on; Ray must have the resources for them.

    Args:
        address: Ray cluster address for ``ray.init`` (``"auto"``, ``"ray://head:10001"``); None starts or
            joins a local Ray. Ignored when Ray is already initialised in this process.
        n_runners: Runner actors.
        runner_resources: Resources of each actor (see `actor_options`).
        runtime_env: Ray runtime environment of the actors.
        role: ``"both"`` (algorithm and runners) or ``"runner"`` (runners only, against ``store_uri``,
            until Ctrl-C or until every runner has finished; used by ``agl runner --strategy ray``).
        store_uri: A store URI every actor opens instead of the driver serving ``store``.
        server_host: Interface the driver serves the store on (default: this node's Ray IP).
        server_port: Port of that server (0: a free one).
        max_restarts: Dead actors replaced over the run.
        graceful_timeout: Seconds a stopping actor gets for its rollout before it is cancelled.
        connect_timeout: Seconds an actor waits for the store before failing the run.
        init_kwargs: Extra keyword arguments of ``ray.init`` (``num_cpus``, ``include_dashboard``...).
        first_worker_id: Worker id of the first actor (``Worker-<id>`` in the store); the next count up.
    """

    def __init__(
        self,
        address: str | None = None,
        n_runners: int = 1,
        runner_resources: Mapping[str, float] | None = None,
        runtime_env: Mapping[str, Any] | None = None,
        role: Role = "both",
        store_uri: str | None = None,
        server_host: str | None = None,
        server_port: int = 0,
        max_restarts: int = 3,
        graceful_timeout: float = 10.0,
        connect_timeout: float = 15.0,
        init_kwargs: Mapping[str, Any] | None = None,
        first_worker_id: int = 0,
    ) -> None:
        if not isinstance(n_runners, int) or isinstance(n_runners, bool) or n_runners < 1:
            raise ValueError(f"n_runners must be an integer >= 1, got {n_runners!r}.")
        if role not in ("both", "runner"):
            raise ValueError(f"role must be 'both' or 'runner', got {role!r}.")
        if role == "runner" and not store_uri:
            raise ValueError("role='runner' needs store_uri: the store the runners join (http://host:port).")
        if store_uri is not None and store_uri.split(":", 1)[0] == "memory":
            raise ValueError(
                "store_uri='memory:' would give every actor its own empty store; pass the store to the "
                "Trainer (the driver serves it) or a URI every node can open (http://, postgresql://, ...)."
            )
        if not isinstance(max_restarts, int) or max_restarts < 0:
            raise ValueError(f"max_restarts must be an integer >= 0, got {max_restarts!r}.")
        if graceful_timeout <= 0 or connect_timeout <= 0:
            raise ValueError(
                f"graceful_timeout and connect_timeout must be > 0 seconds, got {graceful_timeout!r} and "
                f"{connect_timeout!r}."
            )
        self.address = address
        self.n_runners = n_runners
        self.runner_resources = dict(runner_resources or {})
        self._actor_options = actor_options(self.runner_resources)
        self.runtime_env = dict(runtime_env) if runtime_env else None
        self.role: Role = role
        self.store_uri = store_uri
        self.server_host = server_host
        self.server_port = server_port
        self.max_restarts = max_restarts
        self.graceful_timeout = float(graceful_timeout)
        self.connect_timeout = float(connect_timeout)
        self.init_kwargs = dict(init_kwargs or {})
        self.first_worker_id = first_worker_id
        self._pool: RunnerActorPool | None = None
        self.last_run: dict[str, Any] = {}
        """Figures of the last run: actors ``started``, ``deaths``, ``replaced``, ``live_counts``."""

    # ------------------------------------------------------------------------------ live control

    def scale(self, n_runners: int) -> None:
        """Change the number of runner actors during a run (new ones start, surplus ones finish and stop)."""
        if not isinstance(n_runners, int) or isinstance(n_runners, bool) or n_runners < 0:
            raise ValueError(f"scale() needs an integer >= 0, got {n_runners!r}.")
        self.n_runners = max(1, n_runners)
        if self._pool is not None:
            self._pool.scale(n_runners)

    @property
    def pool(self) -> RunnerActorPool | None:
        """The actor pool of the run in progress (None outside ``execute``)."""
        return self._pool

    def runner_actors(self) -> dict[int, Any]:
        """Handles of the running runner actors by worker id (empty outside ``execute``)."""
        return self._pool.handles() if self._pool is not None else {}

    # ------------------------------------------------------------------------------ execute

    def execute(self, algorithm: AlgorithmBundle, runner: RunnerBundle, store: LightningStore) -> None:
        """Run the algorithm here and the runners as actors until the algorithm returns (or Ctrl-C)."""
        import ray

        started_ray = False
        if not ray.is_initialized():
            ray.init(address=self.address, **self.init_kwargs)
            started_ray = True
        try:
            asyncio.run(self._main(algorithm, runner, store))
        except KeyboardInterrupt:
            logger.warning("Interrupted: every runner actor was stopped and its in-flight attempt reported.")
        finally:
            if started_ray:
                ray.shutdown()

    async def _main(self, algorithm: AlgorithmBundle, runner: RunnerBundle, store: LightningStore) -> None:
        from agl_ray.pool import RunnerActorPool

        event = ThreadingEvent()
        options = dict(self._actor_options)
        if self.runtime_env:
            options["runtime_env"] = self.runtime_env
        async with self._serving(store) as store_uri:
            pool = RunnerActorPool(
                runner,
                store,
                store_uri,
                actor_options=options,
                max_restarts=self.max_restarts,
                connect_timeout=self.connect_timeout,
                grace=self.graceful_timeout,
                first_worker_id=self.first_worker_id,
            )
            pool.scale(self.n_runners)
            self._pool = pool
            supervisor = asyncio.ensure_future(pool.supervise(stop_when_idle=self.role == "runner"))
            work: asyncio.Future[Any] | None = None
            try:
                waits: set[asyncio.Future[Any]] = {supervisor}
                if self.role == "both":
                    work = asyncio.ensure_future(algorithm(store, event))
                    waits.add(work)
                done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                for future in done:
                    future.result()
            finally:
                event.set()
                supervisor.cancel()
                await asyncio.gather(supervisor, return_exceptions=True)
                await pool.close()
                if work is not None and not work.done():
                    await asyncio.wait({work}, timeout=self.graceful_timeout)
                    work.cancel()
                    await asyncio.gather(work, return_exceptions=True)
                self._pool = None
                self.last_run = {
                    "started": pool.started,
                    "deaths": pool.deaths,
                    "replaced": pool.replaced,
                    "live_counts": list(pool.live_counts),
                }
                logger.info(
                    "Ray runners: %d started, %d died, %d replaced.", pool.started, pool.deaths, pool.replaced
                )

    @asynccontextmanager
    async def _serving(self, store: LightningStore) -> AsyncIterator[str]:
        """Yield the URI the actors open: ``store_uri``, a shared client's URL, or the driver's server."""
        if self.store_uri:
            yield self.store_uri
            return
        url = getattr(store, "url", None)
        if isinstance(url, str) and url.startswith(("http://", "https://")):
            yield url
            return
        import ray

        host = self.server_host or ray.util.get_node_ip_address()
        if store.capabilities.get("thread_safe", False):
            from agl_core.store.http.background import BackgroundServer

            background = BackgroundServer(store, host=host, port=self.server_port)
            await asyncio.to_thread(background.start)
            try:
                logger.info("Store served to the runner actors at %s (own thread).", background.endpoint)
                yield background.endpoint
            finally:
                await asyncio.to_thread(background.stop)
            return
        from agl_core.store.http.server import LightningStoreServer

        server = LightningStoreServer(store, host, self.server_port)
        await server.start()
        try:
            logger.info("Store served to the runner actors at %s.", server.endpoint)
            yield server.endpoint
        finally:
            await server.stop()
