"""`LoopThread` and `Ticker`: the shared event-loop-on-a-thread helpers."""

from __future__ import annotations

import asyncio
import threading

import pytest

from agl_core.utils.loop_thread import LoopThread, Ticker


def test_a_loop_thread_runs_setup_calls_and_teardown_on_its_own_loop() -> None:
    seen: list[tuple[str, int]] = []
    thread = LoopThread("test-loop", timeout=30)

    async def record(label: str) -> int:
        seen.append((label, threading.get_ident()))
        return len(seen)

    assert thread.start(lambda: record("setup")) == 1
    assert thread.call(lambda: record("call")) == 2
    thread.stop(lambda: record("teardown"))
    assert [label for label, _ in seen] == ["setup", "call", "teardown"]
    assert len({ident for _, ident in seen}) == 1 and seen[0][1] != threading.get_ident()
    assert not thread.running and thread.loop is not None and thread.loop.is_closed()
    thread.stop()  # idempotent
    with pytest.raises(RuntimeError, match="not running"):
        thread.call(lambda: record("late"))


def test_a_failing_setup_stops_the_thread_and_raises() -> None:
    thread = LoopThread("test-loop", timeout=30)

    async def fail() -> None:
        raise ValueError("no port")

    with pytest.raises(ValueError, match="no port"):
        thread.start(fail)
    assert not thread.running
    assert thread.start() is None  # startable again
    with pytest.raises(RuntimeError, match="already running"):
        thread.start()
    thread.stop()


def test_a_call_that_takes_too_long_is_a_timeout_error() -> None:
    thread = LoopThread("test-loop", timeout=30)
    thread.start()
    release = asyncio.Event()
    try:
        with pytest.raises(TimeoutError, match="no result within"):
            thread.call(release.wait, timeout=0.05)
    finally:
        thread.stop()


@pytest.mark.parametrize("threaded", [True, False])
async def test_a_ticker_repeats_until_stopped_and_reports_failures(threaded: bool) -> None:
    ticks: list[int] = []
    errors: list[str] = []
    enough = threading.Event()

    async def tick() -> None:
        ticks.append(threading.get_ident())
        if len(ticks) == 2:
            raise RuntimeError("second tick fails")
        if len(ticks) >= 4:
            enough.set()

    def on_error(exc: Exception) -> bool:
        errors.append(str(exc))
        return True

    ticker = Ticker("test-ticker", tick, delay=lambda elapsed: 0.001, on_error=on_error)
    ticker.start(threaded=threaded)
    ticker.start(threaded=threaded)  # a second start does nothing
    assert await asyncio.to_thread(enough.wait, 30)
    assert await ticker.stop(30)
    count = len(ticks)
    await asyncio.sleep(0.05)
    assert len(ticks) == count, "no tick after stop"
    assert errors == ["second tick fails"]
    on_other_thread = ticks[0] != threading.get_ident()
    assert on_other_thread is threaded


async def test_a_ticker_ends_when_on_error_says_so() -> None:
    ticks: list[int] = []
    ended = threading.Event()

    async def tick() -> None:
        ticks.append(1)
        raise RuntimeError("broken")

    def on_error(exc: Exception) -> bool:
        ended.set()
        return False

    ticker = Ticker("test-ticker", tick, delay=lambda elapsed: 0.001, on_error=on_error)
    ticker.start(threaded=True)
    assert await asyncio.to_thread(ended.wait, 30)
    assert await ticker.stop(30)
    assert ticks == [1]
