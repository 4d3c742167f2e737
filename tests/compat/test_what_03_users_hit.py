"""What Agent Lightning 0.3 code still hit (issue 38 §1), as 0.3 user code with ``agl_core`` imports."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

import agl_core as agl
from agl_core.trainer import build_component


async def test_client_keeps_server_address() -> None:
    server = agl.LightningStoreServer(agl.InMemoryLightningStore(), "127.0.0.1", 0)
    await server.start()
    try:
        client = agl.LightningStoreClient(server.endpoint)
        assert client.server_address == server.endpoint.rstrip("/") + "/v1/agl"
        assert client.server_address_root == server.endpoint.rstrip("/")
        await client.close()
    finally:
        await server.stop()


def test_build_component_fills_actual_type() -> None:
    with pytest.raises(ValueError) as info:
        build_component(
            42,
            expected_type=agl.Tracer,
            spec_name="tracer",
            invalid_spec_error_fmt="tracer got {actual_type}, wanted {expected_type}",
        )
    assert str(info.value) == "tracer got <class 'int'>, wanted Tracer"


APO_LOG_SCRIPT = """
import logging, sys
import agl_core as agl

agl.setup_logging()
handler = logging.FileHandler(sys.argv[1])
handler.setLevel(logging.INFO)
handler.setFormatter(logging.Formatter("%(name)s %(message)s"))
logging.getLogger("agentlightning.algorithm.apo").addHandler(handler)
logging.getLogger("agl_core.algorithm.apo.search").info("beam round 1")
logging.getLogger("agl_core.store").info("not an apo record")
quiet = logging.getLogger("agentlightning.store.memory")
quiet.addHandler(handler)
quiet.setLevel(logging.ERROR)
logging.getLogger("agl_core.store.memory").warning("below the level of agentlightning.store.memory")
"""


def test_handlers_on_agentlightning_loggers_get_agls_records(tmp_path: Path) -> None:
    """0.3's APO example: a file handler on ``agentlightning.algorithm.apo`` after ``setup_logging()``."""
    log = tmp_path / "apo.log"
    out = subprocess.run(
        [sys.executable, "-c", APO_LOG_SCRIPT, str(log)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert log.read_text().splitlines() == ["agl_core.algorithm.apo.search beam round 1"]
    assert "beam round 1" in out.stdout + out.stderr  # setup_logging's console still prints it


def test_dummy_span_recording_context_has_public_fields() -> None:
    from agl_core.tracer.dummy import DummySpanRecordingContext

    ctx = DummySpanRecordingContext("step", {"k": 1})
    ctx.record_attributes({"j": 2})
    ctx.record_status("ERROR", "boom")
    assert (ctx.name, ctx.attributes, ctx.status.status_code) == ("step", {"k": 1, "j": 2}, "ERROR")
    assert ctx.end_time is None and ctx.start_time > 0
    ctx.finalize()
    assert ctx.get_recorded_span().name == "step"


def test_shared_memory_reads_managed_store_at_construction(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGL_MANAGED_STORE", "0")
    assert agl.SharedMemoryExecutionStrategy().managed_store is False
    monkeypatch.delenv("AGL_MANAGED_STORE")
    assert agl.SharedMemoryExecutionStrategy().managed_store is True


async def test_threaded_wrapper_locks_a_store_that_is_not_thread_safe() -> None:
    """0.3's ``LightningStoreThreaded`` runs one call at a time on a store that is not thread-safe."""
    inside: list[int] = []
    overlap: list[bool] = []
    guard = threading.Lock()

    class Unsafe(agl.InMemoryLightningStore):
        async def enqueue_rollout(self, *args: Any, **kwargs: Any) -> Any:
            with guard:
                inside.append(1)
                overlap.append(len(inside) > 1)
            try:
                return await super().enqueue_rollout(*args, **kwargs)
            finally:
                with guard:
                    inside.pop()

    store = Unsafe(thread_safe=False)
    threaded = agl.LightningStoreThreaded(store)
    assert threaded.capabilities["thread_safe"] and threaded._lock is not None

    def enqueue_many() -> None:
        import asyncio

        async def main() -> None:
            for i in range(20):
                await threaded.enqueue_rollout(input={"i": i})

        asyncio.run(main())

    threads = [threading.Thread(target=enqueue_many) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(overlap) == 80 and not any(overlap)
    assert len((await store.query_rollouts()).items) == 80
    assert agl.LightningStoreThreaded(agl.InMemoryLightningStore())._lock is None  # agl stores: no lock


async def test_raw_http_client_of_03() -> None:
    """A hand-written 0.3 client: a body-less dequeue, FastAPI's ``detail`` on errors, 200 preflights."""
    import aiohttp

    server = agl.LightningStoreServer(agl.InMemoryLightningStore(), "127.0.0.1", 0, cors_origins=["*"])
    await server.start()
    base = server.endpoint.rstrip("/") + "/v1/agl"
    try:
        async with aiohttp.ClientSession() as http:
            async with http.post(base + "/queues/rollouts/dequeue") as response:
                assert response.status == 200 and await response.json() == []
            async with http.post(base + "/rollouts/ro-missing", json={"status": "failed"}) as response:
                body = await response.json()
                assert response.status == 404 and body["detail"] == body["error"]["message"]
            async with http.post(base + "/rollouts", json={"input": None, "bogus": 1}) as response:
                body = await response.json()
                assert response.status == 422 and "bogus" in body["detail"]  # as FastAPI answered
            preflight = {"Origin": "http://ui.example", "Access-Control-Request-Method": "POST"}
            async with http.options(base + "/rollouts", headers=preflight) as response:
                assert response.status == 200
    finally:
        await server.stop()


def test_paginated_result_repr_is_03s() -> None:
    assert repr(agl.PaginatedResult[int](items=[], limit=-1, offset=0, total=0)) == (
        "<PaginatedResult (0: of 0) empty>"
    )
    assert repr(agl.PaginatedResult[int](items=[7], limit=5, offset=10, total=11)) == (
        "<PaginatedResult (10:15 of 11) 7>"
    )


def test_runner_worker_id_is_reset_after_run_context() -> None:
    runner = agl.LitAgentRunner(agl.DummyTracer())

    @agl.rollout
    def agent(task: Any) -> float:
        return 1.0

    with runner.run_context(agent=agent, store=agl.InMemoryLightningStore(), worker_id=3):
        assert runner.worker_id == 3
    assert runner.worker_id is None


def test_get_tracer_provider_logs_another_librarys_provider(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """0.3's write_traces example: AgentOps installs its own provider; 0.3 logged it and went on."""
    from opentelemetry import trace as trace_api

    from agl_core.utils.otel import get_tracer_provider

    class OtherProvider(trace_api.NoOpTracerProvider):
        pass

    other = OtherProvider()
    monkeypatch.setattr(trace_api, "_TRACER_PROVIDER", other)
    with caplog.at_level("ERROR", logger="agl_core.utils.otel"):
        assert get_tracer_provider() is other
    assert "OtherProvider" in caplog.text
    monkeypatch.setattr(trace_api, "_TRACER_PROVIDER", None)
    with pytest.raises(RuntimeError, match="No OpenTelemetry SDK tracer provider"):
        get_tracer_provider()


async def test_limit_zero_is_an_empty_page_that_counts() -> None:
    store = agl.InMemoryLightningStore()
    for i in range(3):
        await store.enqueue_rollout(input={"i": i})
    page = await store.query_rollouts(limit=0)
    assert (list(page), page.total, page.limit) == ([], 3, 0)
    assert list(await store.query_workers(limit=0)) == []


async def test_update_worker_with_none_stats_raises_type_error() -> None:
    store = agl.InMemoryLightningStore()
    with pytest.raises(TypeError):
        await store.update_worker("worker-1", heartbeat_stats=None)  # type: ignore[arg-type]


async def test_null_worker_id_on_an_attempt_update_is_refused_as_03s_server_did() -> None:
    server = agl.LightningStoreServer(agl.InMemoryLightningStore(), "127.0.0.1", 0)
    await server.start()
    try:
        import aiohttp

        started = await server.store.start_rollout(input={"q": 1})
        path = f"/v1/agl/rollouts/{started.rollout_id}/attempts/{started.attempt.attempt_id}"
        url = server.endpoint.rstrip("/") + path
        async with aiohttp.ClientSession() as http, http.post(url, json={"worker_id": None}) as response:
            body = await response.json()
        assert response.status == 400
        assert body["detail"].startswith("worker_id is invalid; it cannot be a null value.")
        client = agl.LightningStoreClient(server.endpoint)
        with pytest.raises(ValueError, match="cannot be a null value"):
            await client.update_attempt(started.rollout_id, "latest", worker_id=None)  # type: ignore[arg-type]
        await client.close()
    finally:
        await server.stop()


def test_a_stored_lowercase_true_reads_back_true() -> None:
    """0.3's reader compared ``literal.lower() == "true"``: spans written by other emitters read the same."""
    from agl_core.emitter import get_object_value

    span = agl.Span.from_attributes(
        attributes={"agentlightning.object.type": "bool", "agentlightning.object.literal": "true"}
    )
    assert get_object_value(span) is True
    assert get_object_value(agl.emit_object(False, propagate=False)) is False


def test_emitters_use_the_tracer_patched_on_their_module(monkeypatch: pytest.MonkeyPatch) -> None:
    """0.3's tests patch ``<emitter module>.get_active_tracer``; ``operation`` looks it up in annotation."""
    from agl_core.emitter import annotation as annotation_module
    from agl_core.emitter import exception as exception_module
    from agl_core.emitter import message as message_module
    from agl_core.emitter import object as object_module

    names: list[str] = []

    class Recording(agl.DummyTracer):
        def create_span(self, name: str, *args: Any, **kwargs: Any) -> Any:
            names.append(name)
            return super().create_span(name, *args, **kwargs)

        def operation_context(self, name: str, *args: Any, **kwargs: Any) -> Any:
            names.append(name)
            return super().operation_context(name, *args, **kwargs)

    tracer = Recording()
    for module in (annotation_module, exception_module, message_module, object_module):
        monkeypatch.setattr(module, "get_active_tracer", lambda: tracer)
    agl.emit_message("hi")
    agl.emit_object({"a": 1})
    agl.emit_exception(ValueError("boom"))
    agl.emit_annotation({"k": "v"})
    with agl.operation(name="step"):
        pass
    assert names == [
        "agentlightning.message",
        "agentlightning.object",
        "agentlightning.exception",
        "agentlightning.annotation",
        "agentlightning.operation",
    ]


async def test_patching_span_conversion_where_03_tests_patched_it() -> None:
    """0.3's store tests patch ``agentlightning.store.client_server.Span.from_opentelemetry``."""
    from unittest.mock import patch

    from opentelemetry.sdk.trace import TracerProvider

    store = agl.InMemoryLightningStore()
    attempted = await store.start_rollout(input={"q": 1})
    with TracerProvider().get_tracer("t").start_as_current_span("raw") as raw:
        pass
    made: list[str] = []

    def convert(readable: Any, rollout_id: str, attempt_id: str, sequence_id: int) -> agl.Span:
        made.append(readable.name)
        return agl.Span.from_attributes(
            attributes={}, rollout_id=rollout_id, attempt_id=attempt_id, sequence_id=sequence_id
        )

    with patch("agl_core.store.client_server.Span.from_opentelemetry", side_effect=convert):
        await store.add_otel_span(attempted.rollout_id, attempted.attempt.attempt_id, raw)  # type: ignore[arg-type]
    assert made == ["raw"]
