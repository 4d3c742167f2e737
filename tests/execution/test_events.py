"""Stop events: a `MultiprocessingEvent` set in a child process is seen by the parent, and vice versa."""

from __future__ import annotations

import multiprocessing

from agl_core.execution import ExecutionEvent, MultiprocessingEvent, ThreadingEvent


def set_it(event: MultiprocessingEvent) -> None:
    event.set()


def wait_then_clear(event: MultiprocessingEvent, done: MultiprocessingEvent) -> None:
    if event.wait(30):
        event.clear()
        done.set()


def test_threading_event_protocol() -> None:
    event = ThreadingEvent()
    assert isinstance(event, ExecutionEvent)
    assert not event.is_set() and not event.wait(0.01)
    event.set()
    assert event.is_set() and event.wait(0)
    event.clear()
    assert not event.is_set()


def test_multiprocessing_event_crosses_processes_both_ways() -> None:
    ctx = multiprocessing.get_context()
    event, done = MultiprocessingEvent(ctx=ctx), MultiprocessingEvent(ctx=ctx)
    assert isinstance(event, ExecutionEvent)
    child = ctx.Process(target=set_it, args=(event,))
    child.start()
    child.join(30)
    assert child.exitcode == 0 and event.wait(5)

    child = ctx.Process(target=wait_then_clear, args=(event, done))
    child.start()
    assert done.wait(30)
    child.join(30)
    assert not event.is_set()


def test_multiprocessing_event_survives_spawn_pickling() -> None:
    ctx = multiprocessing.get_context("spawn")
    event = MultiprocessingEvent(ctx=ctx)
    child = ctx.Process(target=set_it, args=(event,))
    child.start()
    child.join(60)
    assert child.exitcode == 0 and event.is_set()
