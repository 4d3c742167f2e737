"""`ClientServerExecutionStrategy`: parameters, roles, runner processes, exit codes, shutdown escalation."""

from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path

import psutil
import pytest

from agl_core.execution import ClientServerExecutionStrategy
from agl_core.execution.events import ExecutionEvent, ThreadingEvent
from agl_core.execution.processes import ParentAwareEvent
from agl_core.store.base import LightningStore
from agl_core.store.http.background import BackgroundServer
from agl_core.store.http.client import LightningStoreClient
from agl_core.store.memory import InMemoryLightningStore
from tests.execution import _cs_bundles as bundles


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def attempts(store: LightningStore) -> list[dict[str, object]]:
    async def collect() -> list[dict[str, object]]:
        result = []
        for rollout in await store.query_rollouts():
            assert rollout.status == "succeeded"
            (attempt,) = await store.query_attempts(rollout.rollout_id)
            result.append({"worker": attempt.worker_id, **(attempt.metadata or {})})
        return result

    return asyncio.run(collect())


# ---------------------------------------------------------------------------------- parameters


def test_parameters_come_from_arguments_then_environment_then_defaults(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("AGL_CURRENT_ROLE", "AGL_SERVER_HOST", "AGL_SERVER_PORT", "AGL_MANAGED_STORE"):
        monkeypatch.delenv(name, raising=False)
    default = ClientServerExecutionStrategy()
    assert (default.role, default.server_host, default.server_port, default.managed_store) == (
        "both",
        "localhost",
        4747,
        True,
    )
    monkeypatch.setenv("AGL_CURRENT_ROLE", "runner")
    monkeypatch.setenv("AGL_SERVER_HOST", "10.0.0.5")
    monkeypatch.setenv("AGL_SERVER_PORT", "9999")
    monkeypatch.setenv("AGL_MANAGED_STORE", "no")
    from_env = ClientServerExecutionStrategy()
    assert (from_env.role, from_env.server_host, from_env.server_port, from_env.managed_store) == (
        "runner",
        "10.0.0.5",
        9999,
        False,
    )
    assert from_env.client_url() == "http://10.0.0.5:9999"
    explicit = ClientServerExecutionStrategy(
        role="algorithm", server_host="0.0.0.0", server_port=1, managed_store=True
    )
    assert (explicit.role, explicit.server_port, explicit.managed_store) == ("algorithm", 1, True)
    assert explicit.client_url() == "http://127.0.0.1:1"
    monkeypatch.setenv("AGL_SERVER_PORT", "not-a-port")
    with pytest.raises(ValueError, match="AGL_SERVER_PORT must be an integer"):
        ClientServerExecutionStrategy()


def test_validation() -> None:
    with pytest.raises(ValueError, match="role must be one of"):
        ClientServerExecutionStrategy(role="gpu")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="needs role='both' and n_runners=1"):
        ClientServerExecutionStrategy(main_process="runner", n_runners=2)
    with pytest.raises(ValueError, match="server_port must be an integer between 0 and 65535"):
        ClientServerExecutionStrategy(server_port=70000)
    strategy = ClientServerExecutionStrategy(role="runner", server_port=0)
    with pytest.raises(ValueError, match="must name its port"):
        strategy.execute(bundles.wait_for_stop, bundles.completing_runner, InMemoryLightningStore())


# ---------------------------------------------------------------------------------- roles


def test_both_runs_runners_as_processes_talking_to_the_served_store() -> None:
    store = InMemoryLightningStore()
    strategy = ClientServerExecutionStrategy(n_runners=2, server_port=0)

    strategy.execute(bundles.enqueue_when_two_runners_joined, bundles.completing_runner, store)

    records = attempts(store)
    assert len(records) == bundles.N_ROLLOUTS
    assert {r["store"] for r in records} == {"LightningStoreClient"}
    assert os.getpid() not in {r["pid"] for r in records}
    workers = {w.worker_id for w in asyncio.run(store.query_workers())}
    assert workers == {"w0", "w1"}


def test_main_process_runner_keeps_store_mutations_in_the_algorithm_process() -> None:
    store = InMemoryLightningStore()
    bundles.main_process_runs.clear()
    strategy = ClientServerExecutionStrategy(main_process="runner", server_port=0)

    strategy.execute(bundles.enqueue_and_wait, bundles.recording_runner, store)

    assert bundles.main_process_runs == [(os.getpid(), True)] * bundles.N_ROLLOUTS
    assert asyncio.run(store.statistics())["total_rollouts"] == 0  # the child's copy got them


def test_role_algorithm_serves_the_store_for_runners_elsewhere() -> None:
    port = free_port()
    seen: list[int] = []

    async def algorithm(store: LightningStore, event: ExecutionEvent) -> None:
        await store.enqueue_rollout(input="x")
        client = LightningStoreClient(f"http://127.0.0.1:{port}")
        try:
            seen.append((await client.statistics())["total_rollouts"])
        finally:
            await client.close()

    ClientServerExecutionStrategy(role="algorithm", server_port=port).execute(
        algorithm, bundles.completing_runner, InMemoryLightningStore()
    )
    assert seen == [1]


def test_unmanaged_store_is_passed_through_to_both_sides() -> None:
    with BackgroundServer(InMemoryLightningStore()) as server:
        client = LightningStoreClient(server.endpoint)
        ClientServerExecutionStrategy(n_runners=1, server_port=0, managed_store=False).execute(
            bundles.enqueue_and_wait, bundles.completing_runner, client
        )
        records = attempts(client)
        asyncio.run(client.close())
    assert len(records) == bundles.N_ROLLOUTS and {r["store"] for r in records} == {"LightningStoreClient"}


# ---------------------------------------------------------------------------------- failures


@pytest.mark.parametrize(
    ("runner", "code"), [(bundles.crashing_runner, "1"), (bundles.self_killing_runner, "-9")]
)
def test_crashed_runner_processes_stop_the_run_and_raise(runner: object, code: str) -> None:
    strategy = ClientServerExecutionStrategy(n_runners=2, server_port=0, graceful_timeout=1.0)
    with pytest.raises(RuntimeError, match=rf"Subprocesses failed with unexpected exit codes: .*: {code}"):
        strategy.execute(bundles.wait_for_stop, runner, InMemoryLightningStore())  # type: ignore[arg-type]


def test_a_runner_that_ignores_the_event_and_sigint_is_terminated(tmp_path: Path) -> None:
    strategy = ClientServerExecutionStrategy(
        n_runners=2, server_port=0, graceful_timeout=0.5, terminate_timeout=2.0
    )
    strategy.execute(
        bundles.waiting_for_pid_files(tmp_path, 2),
        bundles.stubborn_runner_for(tmp_path),
        InMemoryLightningStore(),
    )
    pids = [int(p.read_text()) for p in tmp_path.glob("*.pid")]
    assert len(pids) == 2
    assert not any(psutil.pid_exists(pid) for pid in pids)


def test_a_busy_port_is_a_clear_error() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        strategy = ClientServerExecutionStrategy(n_runners=0, server_port=port)
        with pytest.raises(RuntimeError, match=r"Trainer\(port=0\)"):
            strategy.execute(bundles.wait_for_stop, bundles.completing_runner, InMemoryLightningStore())


def test_a_child_treats_its_parent_exiting_as_the_stop_event() -> None:
    event = ThreadingEvent()
    assert not ParentAwareEvent(event, os.getppid()).is_set()
    orphaned = ParentAwareEvent(event, parent_pid=os.getppid() + 1_000_000)
    assert orphaned.is_set() and orphaned.wait(0.01)
