"""`ClientServerExecutionStrategy` (``"cs"``): the algorithm serves the store; runners are processes.

The algorithm side wraps the store in a `LightningStoreServer`; runner processes (here or on other
machines, see ``agl runner``) talk to it with a `LightningStoreClient`.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from multiprocessing.context import BaseContext
from typing import TYPE_CHECKING, Any, Literal

from agl_core.env_var import (
    LightningEnvVar,
    resolve_bool_env_var,
    resolve_int_env_var,
    resolve_str_env_var,
)
from agl_core.execution.base import AlgorithmBundle, ExecutionStrategy, RunnerBundle
from agl_core.execution.events import ExecutionEvent, MultiprocessingEvent
from agl_core.execution.lifecycle import run_until_stopped
from agl_core.execution.processes import ParentAwareEvent, ProcessGroup

if TYPE_CHECKING:
    from multiprocessing.sharedctypes import Synchronized

    from agl_core.store.base import LightningStore

__all__ = ["DEFAULT_SERVER_PORT", "ClientServerExecutionStrategy"]

logger = logging.getLogger(__name__)

Role = Literal["algorithm", "runner", "both"]
MainProcess = Literal["algorithm", "runner"]

DEFAULT_SERVER_PORT = 4747
"""Port of the store server when neither the argument nor ``AGL_SERVER_PORT`` gives one."""

_ROLES: tuple[str, ...] = ("algorithm", "runner", "both")
_POLL_SECONDS = 0.05
_MONITOR_SECONDS = 0.25
_LOCAL_HOSTS = frozenset({"localhost", "0.0.0.0", "", "::"})


class ClientServerExecutionStrategy(ExecutionStrategy):
    """The algorithm and the store server in one process, runners in ``n_runners`` child processes.

    Roles (argument, else ``AGL_CURRENT_ROLE``, else ``"both"``):

    * ``"algorithm"``: serve the store and run the algorithm; runners join from elsewhere.
    * ``"runner"``: run ``n_runners`` runners (one in this process, or that many child processes)
      against the server at ``server_host:server_port``.
    * ``"both"``: with ``main_process="algorithm"`` (default), runner processes are started first, the
      server and the algorithm run here, and the runners are stopped when the algorithm returns. With
      ``main_process="runner"`` (one runner), the algorithm and the server run in a child process and
      the runner here; store mutations stay in that child.

    Shutdown: the shared `MultiprocessingEvent` is set; runners stop dequeuing, get
    ``graceful_timeout / 2`` seconds for their current rollout and are then cancelled, which marks the
    in-flight attempt ``failed`` (so the store retries it per ``RolloutConfig``). The server keeps serving
    until the runners are gone, so those reports arrive. Processes still alive after ``graceful_timeout``
    get SIGINT, then SIGTERM, then SIGKILL, each waited on for ``terminate_timeout`` seconds. A runner
    whose parent died stops on its own. Exit codes outside ``allowed_exit_codes`` raise
    ``RuntimeError("Subprocesses failed with unexpected exit codes: ...")`` (a warning when another error
    or Ctrl-C is already being handled). Ctrl-C stops everything this way and ``execute`` then returns;
    other errors are re-raised.

    agl differences from Agent Lightning 0.3: the server binds before runner processes need it and its
    port (``0`` picks a free one) reaches them through shared memory; ``"localhost"`` binds and connects
    to 127.0.0.1; a store that is thread-safe is served from its own thread so a busy or synchronous
    algorithm never stalls the runners; runner processes stop when their parent dies; when every runner
    process has crashed the run stops instead of waiting forever.

    Args:
        role: ``"algorithm"``, ``"runner"`` or ``"both"`` (see above).
        server_host: Host the server binds to and clients connect to (else ``AGL_SERVER_HOST``, else
            ``"localhost"``).
        server_port: Port (else ``AGL_SERVER_PORT``, else 4747); 0 picks a free port (not with
            ``role="runner"``).
        n_runners: Runner processes (``role="both"`` may use 0 and rely on ``agl runner`` elsewhere).
        graceful_timeout: Seconds processes get to stop after the event is set.
        terminate_timeout: Seconds waited after each of SIGINT, SIGTERM and SIGKILL.
        main_process: ``"algorithm"`` or ``"runner"`` (the latter needs ``role="both"``, ``n_runners=1``).
        managed_store: Wrap the store in a server / client (else ``AGL_MANAGED_STORE``, else True); when
            false the given store is used as is on both sides (it must then be shared by itself, such as
            a ``LightningStoreClient`` of an ``agl store serve`` server).
        allowed_exit_codes: Exit codes of child processes that are not an error.
    """

    alias = "cs"

    def __init__(
        self,
        role: Role | None = None,
        server_host: str | None = None,
        server_port: int | None = None,
        n_runners: int = 1,
        graceful_timeout: float = 10.0,
        terminate_timeout: float = 10.0,
        main_process: MainProcess = "algorithm",
        managed_store: bool | None = None,
        allowed_exit_codes: Sequence[int] = (0, -15),
    ) -> None:
        resolved_role = resolve_str_env_var(LightningEnvVar.AGL_CURRENT_ROLE, role, "both")
        if resolved_role not in _ROLES:
            raise ValueError(
                "role must be one of 'algorithm', 'runner', or 'both' (argument or AGL_CURRENT_ROLE), "
                f"got {resolved_role!r}."
            )
        port = resolve_int_env_var(LightningEnvVar.AGL_SERVER_PORT, server_port, DEFAULT_SERVER_PORT)
        if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
            raise ValueError(f"server_port must be an integer between 0 and 65535, got {port!r}.")
        if not isinstance(n_runners, int) or isinstance(n_runners, bool) or n_runners < 0:
            raise ValueError(f"n_runners must be an integer >= 0, got {n_runners!r}.")
        if main_process not in ("algorithm", "runner"):
            raise ValueError(f"main_process must be 'algorithm' or 'runner', got {main_process!r}.")
        if main_process == "runner" and (resolved_role != "both" or n_runners != 1):
            raise ValueError(
                "main_process='runner' runs the single runner in this process and the algorithm in a child; "
                f"it needs role='both' and n_runners=1, got role={resolved_role!r}, n_runners={n_runners}."
            )
        if graceful_timeout <= 0 or terminate_timeout <= 0:
            raise ValueError(
                f"graceful_timeout and terminate_timeout must be > 0 seconds, got {graceful_timeout!r} and "
                f"{terminate_timeout!r}."
            )
        self.role: Role = resolved_role  # type: ignore[assignment]
        self.server_host: str = resolve_str_env_var(LightningEnvVar.AGL_SERVER_HOST, server_host, "localhost")  # type: ignore[assignment]
        self.server_port: int = port
        self.n_runners = n_runners
        self.graceful_timeout = float(graceful_timeout)
        self.terminate_timeout = float(terminate_timeout)
        self.main_process: MainProcess = main_process
        self.managed_store: bool = bool(
            resolve_bool_env_var(LightningEnvVar.AGL_MANAGED_STORE, managed_store, True)
        )
        self.allowed_exit_codes: tuple[int, ...] = tuple(allowed_exit_codes)

    # ------------------------------------------------------------------------------ addresses

    @property
    def bind_host(self) -> str:
        """The interface the server binds (``localhost`` means 127.0.0.1)."""
        return "127.0.0.1" if self.server_host == "localhost" else self.server_host

    def client_url(self, port: int | None = None) -> str:
        """The URL runners use to reach the server."""
        host = "127.0.0.1" if self.server_host in _LOCAL_HOSTS else self.server_host
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.server_port if port is None else port}"

    @property
    def runner_grace(self) -> float:
        """Seconds a runner gets for its current rollout after the stop event, before it is cancelled."""
        return max(0.1, self.graceful_timeout / 2)

    # ------------------------------------------------------------------------------ execute

    def execute(self, algorithm: AlgorithmBundle, runner: RunnerBundle, store: LightningStore) -> None:
        """Run this process's role to completion (see the class docstring)."""
        ctx = multiprocessing.get_context()
        event = MultiprocessingEvent(ctx=ctx)
        if self.role == "algorithm":
            self._execute_algorithm(algorithm, store, event)
        elif self.role == "runner":
            self._execute_runners(runner, store, event, ctx)
        elif self.main_process == "algorithm":
            self._execute_both_algorithm_main(algorithm, runner, store, event, ctx)
        else:
            self._execute_both_runner_main(algorithm, runner, store, event, ctx)

    def _execute_algorithm(
        self, algorithm: AlgorithmBundle, store: LightningStore, event: ExecutionEvent
    ) -> None:
        try:
            asyncio.run(self.algorithm_main(algorithm, store, event))
        except KeyboardInterrupt:
            logger.warning("Interrupted: the algorithm and the store server were stopped.")

    def _execute_runners(
        self, runner: RunnerBundle, store: LightningStore, event: MultiprocessingEvent, ctx: BaseContext
    ) -> None:
        if self.managed_store and self.server_port == 0:
            raise ValueError(
                "role='runner' connects to an existing server, so server_port (or AGL_SERVER_PORT) must "
                "name its port; 0 only works where the server is started."
            )
        if self.n_runners <= 1:
            try:
                asyncio.run(self.runner_main(runner, store, 0, event, self.server_port))
            except KeyboardInterrupt:
                logger.warning("Interrupted: the runner stopped and reported its in-flight attempt.")
            return
        port_box, ready = ctx.Value("i", self.server_port), ctx.Event()
        ready.set()
        group = ProcessGroup(ctx, "runners")
        _prepare_fork(runner)
        for worker_id in range(self.n_runners):
            group.spawn(
                _runner_process_main,
                (self, runner, store, worker_id, event, port_box, ready, os.getpid()),
                name=f"agl-runner-{worker_id}",
            )
        interrupted = self._supervise(group, event)
        self._check_exit_codes(group, already_failing=interrupted)

    def _execute_both_algorithm_main(
        self,
        algorithm: AlgorithmBundle,
        runner: RunnerBundle,
        store: LightningStore,
        event: MultiprocessingEvent,
        ctx: BaseContext,
    ) -> None:
        port_box, ready = ctx.Value("i", 0), ctx.Event()
        group = ProcessGroup(ctx, "runners")
        interrupted = False
        error: BaseException | None = None
        try:
            _prepare_fork(runner)
            # Fork the runners before this process starts any thread (the server, the progress display).
            for worker_id in range(self.n_runners):
                group.spawn(
                    _runner_process_main,
                    (self, runner, store, worker_id, event, port_box, ready, os.getpid()),
                    name=f"agl-runner-{worker_id}",
                )
            asyncio.run(
                self.algorithm_main(algorithm, store, event, group=group, port_box=port_box, ready=ready)
            )
        except KeyboardInterrupt:
            interrupted = True
        except BaseException as exc:
            error = exc
        finally:
            event.set()
            if group.alive():
                if interrupted:
                    group.kill_now(self.terminate_timeout)
                else:
                    group.shutdown(event, self.graceful_timeout, self.terminate_timeout)
        self._check_exit_codes(group, already_failing=interrupted or error is not None)
        if interrupted:
            logger.warning(
                "Interrupted: the algorithm, the store server and %d runner(s) were stopped.",
                len(group.processes),
            )
        if error is not None:
            raise error

    def _execute_both_runner_main(
        self,
        algorithm: AlgorithmBundle,
        runner: RunnerBundle,
        store: LightningStore,
        event: MultiprocessingEvent,
        ctx: BaseContext,
    ) -> None:
        port_box, ready, runners_done = ctx.Value("i", 0), ctx.Event(), ctx.Event()
        group = ProcessGroup(ctx, "algorithm")
        group.spawn(
            _algorithm_process_main,
            (self, algorithm, store, event, port_box, ready, runners_done, os.getpid()),
            name="agl-algorithm",
        )
        interrupted = False
        error: BaseException | None = None
        try:
            port = _wait_for_port(port_box, ready, event, alive=lambda: bool(group.alive()))
            if port is None:
                raise RuntimeError(
                    "The algorithm process exited before its store server was ready; see its log above."
                )
            asyncio.run(self.runner_main(runner, store, 0, event, port))
        except KeyboardInterrupt:
            interrupted = True
        except BaseException as exc:
            error = exc
        finally:
            runners_done.set()
            if interrupted or error is not None:
                event.set()
        if interrupted:
            group.shutdown(event, self.graceful_timeout, self.terminate_timeout)
        else:
            interrupted = self._supervise(group, event)
        self._check_exit_codes(group, already_failing=interrupted or error is not None)
        if error is not None:
            raise error

    def _supervise(self, group: ProcessGroup, event: ExecutionEvent) -> bool:
        """Wait until every process of ``group`` exits; on Ctrl-C shut them down and return True."""
        try:
            while group.alive():
                group.join(0.2)
        except KeyboardInterrupt:
            logger.warning("Interrupted: stopping %d process(es).", len(group.alive()))
            group.shutdown(event, self.graceful_timeout, self.terminate_timeout)
            return True
        return False

    def _check_exit_codes(self, group: ProcessGroup, *, already_failing: bool) -> None:
        bad = group.unexpected_exit_codes(self.allowed_exit_codes)
        if not bad:
            return
        message = f"Subprocesses failed with unexpected exit codes: {bad}"
        if already_failing:
            logger.warning(message)
            return
        raise RuntimeError(message)

    # ------------------------------------------------------------------------------ the two sides

    async def algorithm_main(
        self,
        algorithm: AlgorithmBundle,
        store: LightningStore,
        event: ExecutionEvent,
        *,
        group: ProcessGroup | None = None,
        port_box: Synchronized[int] | None = None,
        ready: Any | None = None,
        runners_done: Any | None = None,
    ) -> None:
        """Serve ``store`` (when managed), run the algorithm, then stop the runners before the server."""
        async with self._serving(store) as port:
            if port_box is not None and ready is not None:
                port_box.value = port
                ready.set()
            monitor = asyncio.ensure_future(self._monitor(group, event)) if group is not None else None
            try:
                await run_until_stopped(
                    algorithm(store, event),
                    event,
                    graceful_delay=self.graceful_timeout,
                    poll_interval=_POLL_SECONDS,
                    name="algorithm",
                )
            finally:
                event.set()
                if monitor is not None:
                    monitor.cancel()
                if group is not None and group.alive():
                    await _in_thread(group.shutdown, event, self.graceful_timeout, self.terminate_timeout)
                if runners_done is not None:
                    await _in_thread(runners_done.wait, self.graceful_timeout)

    async def runner_main(
        self, runner: RunnerBundle, store: LightningStore, worker_id: int, event: ExecutionEvent, port: int
    ) -> None:
        """Run one runner bundle against the server at ``port`` (or ``store`` when unmanaged)."""
        client: LightningStore = store
        if self.managed_store:
            from agl_core.store.http.client import LightningStoreClient

            client = LightningStoreClient(self.client_url(port))
        try:
            await run_until_stopped(
                runner(client, worker_id, event),
                event,
                graceful_delay=self.runner_grace,
                poll_interval=_POLL_SECONDS,
                name=f"runner-{worker_id}",
            )
        finally:
            if self.managed_store:
                await client.close()

    @asynccontextmanager
    async def _serving(self, store: LightningStore) -> AsyncIterator[int]:
        """Serve ``store`` for the block and yield the bound port (the configured one when unmanaged)."""
        if not self.managed_store:
            yield self.server_port
            return
        host, port = self.bind_host, self.server_port
        try:
            if store.capabilities.get("thread_safe", False):
                from agl_core.store.http.background import BackgroundServer

                background = BackgroundServer(store, host=host, port=port)
                await _in_thread(background.start)
                assert background.server is not None
                bound = background.server.port
                logger.info("Store server listening on %s (own thread).", background.endpoint)
                try:
                    yield bound
                finally:
                    await _in_thread(background.stop)
                return
            from agl_core.store.http.server import LightningStoreServer

            server = LightningStoreServer(store, host, port)
            await server.start()
        except OSError as exc:
            raise RuntimeError(
                f"Cannot serve the store on {host}:{port}: {exc}. Another process (an earlier run?) may hold "
                "the port: pass Trainer(port=0) (or server_port=0) to pick a free one, or set "
                "AGL_SERVER_PORT."
            ) from exc
        logger.info("Store server listening on %s.", server.endpoint)
        try:
            yield server.port
        finally:
            await server.stop()

    async def _monitor(self, group: ProcessGroup | None, event: ExecutionEvent) -> None:
        """Log runner processes that die; stop the run when every one of them has crashed."""
        if group is None or not group.processes:
            return
        reported: set[int | None] = set()
        while not event.is_set():
            await asyncio.sleep(_MONITOR_SECONDS)
            for process in group.processes:
                if process.pid in reported or process.is_alive():
                    continue
                reported.add(process.pid)
                code = process.exitcode
                if code not in self.allowed_exit_codes:
                    logger.warning(
                        "Runner process %s (pid %s) exited with code %s; its in-flight attempt is retried "
                        "once the store's watchdog flags it (RolloutConfig unresponsive/timeout_seconds).",
                        process.name,
                        process.pid,
                        code,
                    )
            if not group.alive() and group.unexpected_exit_codes(self.allowed_exit_codes):
                logger.error("Every runner process has exited and some crashed; stopping the run.")
                event.set()
                return


async def _in_thread(fn: Callable[..., Any], *args: Any) -> Any:
    """Run blocking ``fn`` in a daemon thread; a cancelled caller does not wait for it (second Ctrl-C)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def deliver(result: Any, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    def target() -> None:
        try:
            result = fn(*args)
        except BaseException as exc:
            loop.call_soon_threadsafe(deliver, None, exc)
        else:
            loop.call_soon_threadsafe(deliver, result, None)

    threading.Thread(target=target, name=f"agl-{getattr(fn, '__name__', 'call')}", daemon=True).start()
    return await future


def _wait_for_port(
    port_box: Synchronized[int], ready: Any, event: ExecutionEvent, alive: Callable[[], bool]
) -> int | None:
    """The server's port once it is ready; None if the run stops (or the server side dies) first."""
    while not ready.wait(0.1):
        if event.is_set() or not alive():
            return None
    return int(port_box.value)


def _prepare_fork(bundle: Any) -> None:
    """Let a bundle do once, in the parent, work each forked child would repeat (``prepare_fork``)."""
    prepare = getattr(bundle, "prepare_fork", None)
    if callable(prepare):
        try:
            prepare()
        except Exception:
            logger.exception(
                "prepare_fork() of %s failed; the children will start without it.", type(bundle).__name__
            )


def _child_signals() -> None:
    """A forked child must not run the parent's SIGINT handler (asyncio's, bound to the parent's loop)."""
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _runner_process_main(
    strategy: ClientServerExecutionStrategy,
    runner: RunnerBundle,
    store: LightningStore,
    worker_id: int,
    event: ExecutionEvent,
    port_box: Synchronized[int],
    ready: Any,
    parent_pid: int,
) -> None:
    """Entry point of a runner process."""
    _child_signals()
    stop = ParentAwareEvent(event, parent_pid)
    try:
        port = _wait_for_port(port_box, ready, stop, alive=stop.parent_alive)
        if port is None:
            return
        asyncio.run(strategy.runner_main(runner, store, worker_id, stop, port))
    except KeyboardInterrupt:
        logger.info("Runner %d interrupted; it reported its in-flight attempt and stopped.", worker_id)
    except BaseException:
        logger.exception("Runner process %d crashed.", worker_id)
        sys.exit(1)


def _algorithm_process_main(
    strategy: ClientServerExecutionStrategy,
    algorithm: AlgorithmBundle,
    store: LightningStore,
    event: ExecutionEvent,
    port_box: Synchronized[int],
    ready: Any,
    runners_done: Any,
    parent_pid: int,
) -> None:
    """Entry point of the algorithm process (``main_process="runner"``)."""
    _child_signals()
    stop = ParentAwareEvent(event, parent_pid)
    try:
        asyncio.run(
            strategy.algorithm_main(
                algorithm, store, stop, port_box=port_box, ready=ready, runners_done=runners_done
            )
        )
    except KeyboardInterrupt:
        logger.info("Algorithm process interrupted; the store server was stopped.")
    except BaseException:
        logger.exception("Algorithm process crashed.")
        sys.exit(1)
