"""`SharedMemoryExecutionStrategy` (``"shm"``): the algorithm and the runners as threads of one process."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Literal

from agl_core.env_var import LightningEnvVar, resolve_bool_env_var
from agl_core.execution.base import AlgorithmBundle, ExecutionStrategy, RunnerBundle
from agl_core.execution.events import ThreadingEvent
from agl_core.execution.lifecycle import run_until_stopped

if TYPE_CHECKING:
    from agl_core.store.base import LightningStore

__all__ = ["SharedMemoryExecutionStrategy"]

logger = logging.getLogger(__name__)

MainThread = Literal["algorithm", "runner"]
_JOIN_POLL_SECONDS = 0.2


class SharedMemoryExecutionStrategy(ExecutionStrategy):
    """Run the algorithm and ``n_runners`` runners as threads of this process, sharing one store object.

    Each bundle runs under its own event loop on a thread. One `ThreadingEvent` is shared: once it is
    set, every bundle gets ``graceful_delay`` seconds to return, is then cancelled (a runner reports its
    in-flight attempt as failed, so the store retries it per the rollout's ``RolloutConfig``), and gets
    ``graceful_delay`` more seconds before it is abandoned with an error log.

    ``main_thread="algorithm"``: the runners on a daemon thread (or one thread each, see
    ``isolate_runners``), the algorithm on the calling thread; the event is set when the algorithm
    returns. ``main_thread="runner"`` (one runner only): the algorithm in a thread, the runner on the
    calling thread; when the runner returns, the strategy waits for the algorithm. A crash in any bundle
    sets the event and is re-raised from :meth:`execute` (the first one); Ctrl-C sets the event, lets the
    bundles stop, and propagates ``KeyboardInterrupt``.

    agl differences from Agent Lightning 0.3: ``main_thread`` defaults to ``"runner"`` for one runner and
    ``"algorithm"`` for several (0.3 always defaulted to ``"runner"``, so ``n_runners > 1`` needed an
    explicit choice); the store is not wrapped in a lock when it already declares
    ``capabilities["thread_safe"]`` (every bundled store does); one that does not is wrapped in
    `LightningStoreThreaded` (0.3's lock) unless ``managed_store=False``.

    Args:
        n_runners: Runners (``main_thread="runner"`` needs exactly 1).
        main_thread: Which bundle runs on the calling thread (None: chosen from ``n_runners``).
        join_timeout: Seconds to wait for each thread at the end; stragglers are logged.
        graceful_delay: Seconds a bundle gets after the stop event before it is cancelled (and again
            after the cancellation before it is abandoned).
        poll_interval: Seconds between two checks of the stop event.
        managed_store: Lock a store that is not thread-safe (argument, else ``AGL_MANAGED_STORE``, else True).
        isolate_runners: With ``main_thread="algorithm"``, give every runner its own thread and event loop
            (Agent Lightning 0.3's layout: an async agent that blocks its loop stalls only its own runner).
            By default the runners are tasks of one event loop on one runner thread: they still have their
            own runner and tracer objects and their own tracing context, and one process spends no time
            handing the GIL between runner threads (sync agents run in worker threads either way).
    """

    alias = "shm"

    def __init__(
        self,
        n_runners: int = 1,
        main_thread: MainThread | None = None,
        join_timeout: float = 15.0,
        graceful_delay: float = 5.0,
        poll_interval: float = 0.05,
        managed_store: bool | None = None,
        isolate_runners: bool = False,
    ) -> None:
        if not isinstance(n_runners, int) or isinstance(n_runners, bool) or n_runners < 0:
            raise ValueError(f"n_runners must be an integer >= 0, got {n_runners!r}.")
        if main_thread is None:
            main_thread = "runner" if n_runners == 1 else "algorithm"
        if main_thread not in ("algorithm", "runner"):
            raise ValueError(f"main_thread must be 'algorithm' or 'runner', got {main_thread!r}.")
        if main_thread == "runner" and n_runners != 1:
            raise ValueError(
                f"main_thread='runner' runs exactly one runner on the main thread, but "
                f"n_runners={n_runners}. Use main_thread='algorithm' for several runners."
            )
        for name, value in (
            ("join_timeout", join_timeout),
            ("graceful_delay", graceful_delay),
            ("poll_interval", poll_interval),
        ):
            if value <= 0:
                raise ValueError(f"{name} must be > 0 seconds, got {value!r}.")
        self.n_runners = n_runners
        self.main_thread: MainThread = main_thread
        self.join_timeout = float(join_timeout)
        self.graceful_delay = float(graceful_delay)
        self.poll_interval = float(poll_interval)
        self.managed_store: bool = bool(  # read at construction, as in 0.3
            resolve_bool_env_var(LightningEnvVar.AGL_MANAGED_STORE, managed_store, True)
        )
        self.isolate_runners = isolate_runners

    # ------------------------------------------------------------------------------ execute

    def execute(self, algorithm: AlgorithmBundle, runner: RunnerBundle, store: LightningStore) -> None:
        """Run the bundles as threads until the algorithm (or the main-thread runner) is done."""
        store = self._checked_store(store)
        event = ThreadingEvent()
        errors: list[BaseException] = []
        lock = threading.Lock()

        def record(exc: BaseException) -> None:
            with lock:
                errors.append(exc)
            event.set()

        def thread_main(
            name: str, make: Callable[[], Coroutine[Any, Any, None]], set_event_on_exit: bool
        ) -> None:
            try:
                asyncio.run(self._guarded(make(), event, name))
            except BaseException as exc:
                logger.exception("%s crashed; stopping the run.", name)
                record(exc)
            finally:
                if set_event_on_exit:
                    event.set()

        def algorithm_work() -> Coroutine[Any, Any, None]:
            return algorithm(store, event)

        def runner_work(worker_id: int) -> Callable[[], Coroutine[Any, Any, None]]:
            return lambda: runner(store, worker_id, event)

        interrupted = False
        threads: list[threading.Thread] = []

        def spawn(name: str, make: Callable[[], Coroutine[Any, Any, None]], set_event_on_exit: bool) -> None:
            threads.append(
                threading.Thread(
                    target=thread_main, args=(name, make, set_event_on_exit), name=f"agl-{name}", daemon=True
                )
            )

        if self.main_thread == "algorithm":
            if self.isolate_runners:
                for worker_id in range(self.n_runners):
                    spawn(f"runner-{worker_id}", runner_work(worker_id), False)
            elif self.n_runners:
                spawn("runners", lambda: self._runner_group(runner, store, event, record), False)
            main_name, main_work = "algorithm", algorithm_work
        else:
            spawn("algorithm", algorithm_work, True)
            main_name, main_work = "runner-0", runner_work(0)
        try:
            for thread in threads:
                thread.start()
            try:
                asyncio.run(self._guarded(main_work(), event, main_name))
            except KeyboardInterrupt:
                raise
            except BaseException as exc:
                logger.exception("%s crashed; stopping the run.", main_name)
                record(exc)
            if self.main_thread == "algorithm":
                event.set()
            else:
                self._wait_for_algorithm(threads[0])
        except KeyboardInterrupt:
            interrupted = True
            logger.warning("Interrupted: stopping every bundle (Ctrl-C again to abandon them).")
        finally:
            event.set()
            self._join(threads)
        if interrupted:
            raise KeyboardInterrupt
        if errors:
            raise errors[0]

    async def _runner_group(
        self,
        runner: RunnerBundle,
        store: LightningStore,
        event: ThreadingEvent,
        record: Callable[[BaseException], None],
    ) -> None:
        """Every runner as a task of this thread's loop; a crash is recorded (which sets the event)."""

        async def one(worker_id: int) -> None:
            name = f"runner-{worker_id}"
            try:
                await self._guarded(runner(store, worker_id, event), event, name)
            except Exception as exc:
                logger.exception("%s crashed; stopping the run.", name)
                record(exc)

        await asyncio.gather(*(one(worker_id) for worker_id in range(self.n_runners)))

    async def _guarded(self, work: Coroutine[Any, Any, None], event: ThreadingEvent, name: str) -> None:
        await run_until_stopped(
            work, event, graceful_delay=self.graceful_delay, poll_interval=self.poll_interval, name=name
        )

    def _wait_for_algorithm(self, thread: threading.Thread) -> None:
        """After the main-thread runner returns, wait for the algorithm thread (Ctrl-C interrupts)."""
        while thread.is_alive():
            thread.join(_JOIN_POLL_SECONDS)

    def _join(self, threads: list[threading.Thread]) -> None:
        deadline = time.monotonic() + self.join_timeout
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        stragglers = [t.name for t in threads if t.is_alive()]
        if stragglers:
            logger.error(
                "Threads still running %.0f s after the stop request: %s. They are daemon threads and "
                "will not keep the process alive.",
                self.join_timeout,
                ", ".join(stragglers),
            )

    def _checked_store(self, store: LightningStore) -> LightningStore:
        threads_used = self.n_runners + 1 > 1
        if self.managed_store and threads_used and not store.capabilities.get("thread_safe", False):
            from agl_core.store.threading import LightningStoreThreaded

            return LightningStoreThreaded(store)  # 0.3's lock around every call
        return store
