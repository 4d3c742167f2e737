"""`SharedMemoryExecutionStrategy`: threads, the stop event, main-thread roles, crashes and Ctrl-C."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from agl_core.execution import SharedMemoryExecutionStrategy
from agl_core.execution.events import ExecutionEvent
from agl_core.store.base import LightningStore
from agl_core.store.memory import InMemoryLightningStore


class Calls:
    """Thread-safe log of what each bundle saw."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.items: list[tuple[str, int | None, str, bool]] = []

    def add(self, role: str, worker_id: int | None) -> None:
        thread = threading.current_thread()
        with self.lock:
            self.items.append((role, worker_id, thread.name, thread is threading.main_thread()))


async def idle_runner(calls: Calls, store: LightningStore, worker_id: int, event: ExecutionEvent) -> None:
    calls.add("runner", worker_id)
    while not event.is_set():
        await asyncio.sleep(0.005)


@pytest.mark.parametrize("isolate", [False, True])
def test_algorithm_on_the_main_thread_runners_in_threads_and_the_event_stops_them(isolate: bool) -> None:
    calls = Calls()
    stop_seen: list[bool] = []

    async def algorithm(store: LightningStore, event: ExecutionEvent) -> None:
        calls.add("algorithm", None)
        deadline = time.monotonic() + 10
        while len(calls.items) < 4 and time.monotonic() < deadline:  # every runner started
            await asyncio.sleep(0.005)

    async def runner(store: LightningStore, worker_id: int, event: ExecutionEvent) -> None:
        await idle_runner(calls, store, worker_id, event)
        stop_seen.append(event.is_set())

    SharedMemoryExecutionStrategy(n_runners=3, main_thread="algorithm", isolate_runners=isolate).execute(
        algorithm, runner, InMemoryLightningStore()
    )

    roles = sorted((role, wid) for role, wid, _, _ in calls.items if role == "runner")
    assert roles == [("runner", 0), ("runner", 1), ("runner", 2)]
    assert [main for role, _, _, main in calls.items if role == "algorithm"] == [True]
    assert not any(main for role, _, _, main in calls.items if role == "runner")
    runner_threads = {thread for role, _, thread, _ in calls.items if role == "runner"}
    assert len(runner_threads) == (3 if isolate else 1)
    assert stop_seen == [True, True, True]


def test_runner_on_the_main_thread_and_the_strategy_waits_for_the_algorithm() -> None:
    calls = Calls()
    finished: list[str] = []

    async def algorithm(store: LightningStore, event: ExecutionEvent) -> None:
        calls.add("algorithm", None)
        deadline = time.monotonic() + 10
        while "runner" not in finished and time.monotonic() < deadline:  # outlive the runner
            await asyncio.sleep(0.005)
        finished.append("algorithm")

    async def runner(store: LightningStore, worker_id: int, event: ExecutionEvent) -> None:
        calls.add("runner", worker_id)
        finished.append("runner")

    strategy = SharedMemoryExecutionStrategy()
    assert strategy.main_thread == "runner"
    strategy.execute(algorithm, runner, InMemoryLightningStore())

    assert finished == ["runner", "algorithm"]
    assert [main for role, _, _, main in calls.items if role == "runner"] == [True]


def test_a_runner_crash_stops_the_algorithm_and_is_re_raised() -> None:
    async def algorithm(store: LightningStore, event: ExecutionEvent) -> None:
        while not event.is_set():
            await asyncio.sleep(0.005)

    async def runner(store: LightningStore, worker_id: int, event: ExecutionEvent) -> None:
        if worker_id == 1:
            raise RuntimeError("runner 1 broke")
        while not event.is_set():
            await asyncio.sleep(0.005)

    with pytest.raises(RuntimeError, match="runner 1 broke"):
        SharedMemoryExecutionStrategy(n_runners=2).execute(algorithm, runner, InMemoryLightningStore())


def test_a_bundle_that_ignores_the_event_is_cancelled_after_the_graceful_delay() -> None:
    cancelled: list[int] = []

    async def algorithm(store: LightningStore, event: ExecutionEvent) -> None:
        return None

    async def stubborn(store: LightningStore, worker_id: int, event: ExecutionEvent) -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.append(worker_id)
            raise

    started = time.monotonic()
    SharedMemoryExecutionStrategy(n_runners=2, graceful_delay=0.2).execute(
        algorithm, stubborn, InMemoryLightningStore()
    )
    assert sorted(cancelled) == [0, 1]
    assert time.monotonic() - started < 30  # bounded, far from the 60 s sleep


def test_validation() -> None:
    with pytest.raises(ValueError, match="main_thread='runner' runs exactly one runner"):
        SharedMemoryExecutionStrategy(n_runners=2, main_thread="runner")
    with pytest.raises(ValueError, match="main_thread must be"):
        SharedMemoryExecutionStrategy(main_thread="gpu")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="graceful_delay must be > 0"):
        SharedMemoryExecutionStrategy(graceful_delay=0)


async def noop_algorithm(store: LightningStore, event: ExecutionEvent) -> None:
    return None


async def noop_runner(store: LightningStore, worker_id: int, event: ExecutionEvent) -> None:
    return None


def test_a_store_that_is_not_thread_safe_gets_a_lock_unless_unmanaged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from agl_core.store.threading import LightningStoreThreaded

    store = InMemoryLightningStore(thread_safe=False)
    seen: list[LightningStore] = []

    async def algorithm(given: LightningStore, event: ExecutionEvent) -> None:
        seen.append(given)

    SharedMemoryExecutionStrategy(n_runners=2).execute(algorithm, noop_runner, store)
    assert isinstance(seen[-1], LightningStoreThreaded) and seen[-1].store is store
    SharedMemoryExecutionStrategy(n_runners=2, managed_store=False).execute(algorithm, noop_runner, store)
    assert seen[-1] is store
    monkeypatch.setenv("AGL_MANAGED_STORE", "off")
    SharedMemoryExecutionStrategy(n_runners=2).execute(algorithm, noop_runner, store)
    assert seen[-1] is store
