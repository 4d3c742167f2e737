"""Fixtures of the multi-host fault tests: three hosts (network namespaces) running agl processes."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.multihost.netns import NamespaceLoop, Topology, namespaces_unavailable

HERE = Path(__file__).resolve().parent
PORT = 4747

_reason = namespaces_unavailable() if sys.platform == "linux" else "network namespaces are Linux only"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Skip the whole group, with the reason, where namespaces cannot be made."""
    if _reason is None:
        return
    skip = pytest.mark.skip(reason=f"multi-host tests need network namespaces: {_reason}")
    for item in items:
        if "multihost" in item.nodeid:
            item.add_marker(skip)


class Cluster:
    """One store host and two runner hosts; start/stop ``agl`` processes and talk to the store."""

    def __init__(self, topology: Topology, workdir: Path) -> None:
        self.topology = topology
        self.workdir = workdir
        self.db = workdir / "store.db"
        self.url = f"http://{topology.address['store']}:{PORT}"
        self.processes: dict[str, Any] = {}
        self.controller = NamespaceLoop(topology.ns("store"))
        self._client: Any = None

    def _agl(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "agl_core.cli", *args]

    def start_store(self) -> None:
        """``agl store serve`` on the store host, on the SQLite file (same file on every restart)."""
        log = (self.workdir / "store.log").open("a")
        argv = self._agl("store", "serve", "--store", f"sqlite:///{self.db}", "--host", "0.0.0.0")
        argv += ["--port", str(PORT), "--log-level", "WARNING"]
        self.processes["store"] = self.topology.spawn("store", argv, log)
        self.wait_store()

    def kill_store(self) -> None:
        """SIGKILL the store server (no graceful shutdown)."""
        process = self.processes.pop("store")
        process.kill()
        process.wait(30)

    def start_runner(self, host: str, worker_id: int) -> None:
        """``agl runner`` on ``host`` against the store host."""
        log = (self.workdir / f"{host}.log").open("a")
        argv = self._agl("runner", "--store", self.url, "--agent", "mh_agents:steady_agent")
        argv += ["--worker-id", str(worker_id), "--poll-interval", "0.1", "--server-timeout", "600"]
        argv += ["--grace", "2", "--log-level", "WARNING"]
        self.processes[host] = self.topology.spawn(host, argv, log)

    def client(self) -> Any:
        """A store client living in the store host's namespace (created on the controller loop)."""
        if self._client is None:
            from agl_core.store.http.client import LightningStoreClient

            async def make() -> Any:
                return LightningStoreClient(self.url, retries=40, retry_timeout=120.0)

            self._client = self.controller.call(make)
        return self._client

    def call(self, fn: Callable[[Any], Any], timeout: float = 180.0) -> Any:
        """Run ``await fn(client)`` in the store host's namespace."""
        client = self.client()

        async def run() -> Any:
            return await fn(client)

        return self.controller.call(run, timeout)

    def wait_store(self, timeout: float = 60.0) -> None:
        """Wait until the store answers."""
        from agl_core.store.http.client import LightningStoreClient

        async def ping() -> None:
            probe = LightningStoreClient(self.url, retries=0, timeout=2.0)
            deadline = time.monotonic() + timeout
            try:
                while True:
                    try:
                        await probe.statistics()
                        return
                    except Exception:
                        if time.monotonic() > deadline:
                            raise
                        await asyncio.sleep(0.1)
            finally:
                await probe.close()

        self.controller.call(ping, timeout + 10)

    def close(self) -> None:
        """Close the client and the controller loop (the topology stops the processes)."""
        if self._client is not None:
            self.controller.call(self._client.close)
        self.controller.close()


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cluster]:
    """Hosts ``store``, ``r1`` and ``r2``; torn down (processes and namespaces) after the test."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
    topology = Topology(["store", "r1", "r2"])
    cluster = Cluster(topology, tmp_path)
    try:
        yield cluster
    finally:
        cluster.close()
        topology.close()
        for log in sorted(tmp_path.glob("*.log")):
            tail = log.read_text()[-3000:]
            if tail.strip():
                print(f"--- {log.name} (tail)\n{tail}")


_FIGURES: list[str] = []


def report(name: str, figures: dict[str, Any]) -> None:
    """Keep a scenario's figures: printed as JSON lines at the end of the run (and appended to the file
    named by ``AGL_MULTIHOST_REPORT``, if set)."""
    line = json.dumps({"scenario": name, **figures})
    _FIGURES.append(line)
    out = os.environ.get("AGL_MULTIHOST_REPORT")
    if out:
        with open(out, "a") as handle:
            handle.write(line + "\n")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Print the figures of every scenario that ran."""
    if _FIGURES:
        terminalreporter.section("multi-host figures")
        for line in _FIGURES:
            terminalreporter.write_line(line)
