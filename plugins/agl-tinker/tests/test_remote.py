"""The hosted path: configured from the SDK's settings, fails at start without a key, and fails fast
(our preflight) on an unreachable base URL instead of the SDK's minutes of retries."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest
import tinker

from agl_core.store.memory import InMemoryLightningStore
from agl_tinker import Tinker
from agl_tinker.remote import TinkerConfigError, TinkerUnreachableError, connect_service

# Bound on every wait here: the SDK alone blocks for more than 100 s on an unreachable URL.
BOUND = 20.0


@pytest.fixture(autouse=True)
def _no_ambient_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("TINKER_API_KEY", "TINKER_BASE_URL", "TINKER_CREDENTIAL_CMD"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.tinker/credentials.json


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_without_a_key_the_algorithm_fails_at_start_naming_the_fix(tmp_path: Path) -> None:
    algo = Tinker(model_name="Qwen/Qwen3-4B", run_dir=tmp_path, progress=False)
    algo.set_store(InMemoryLightningStore())
    with pytest.raises(TinkerConfigError, match="TINKER_API_KEY") as info:
        await asyncio.wait_for(algo.run([{"q": 1}]), BOUND)
    assert "backend='local'" in str(info.value)


@pytest.mark.parametrize("host", ["127.0.0.1", "10.255.255.1"])
async def test_dummy_key_and_unreachable_url_fail_fast_with_our_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, host: str
) -> None:
    url = f"http://{host}:{_closed_port()}/services/tinker"
    monkeypatch.setenv("TINKER_API_KEY", "tml-dummy")
    monkeypatch.setenv("TINKER_BASE_URL", url)
    algo = Tinker(model_name="Qwen/Qwen3-4B", run_dir=tmp_path, progress=False, preflight_timeout=2.0)
    algo.set_store(InMemoryLightningStore())
    with pytest.raises(TinkerUnreachableError) as info:
        await asyncio.wait_for(algo.run([{"q": 1}]), BOUND)
    assert url in str(info.value) and "TINKER_BASE_URL" in str(info.value)
    assert algo.training_client is None


async def test_a_reachable_url_gives_the_real_sdk_service_client() -> None:
    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        client = await asyncio.wait_for(
            connect_service(f"http://127.0.0.1:{port}", "tml-dummy", timeout=2.0), BOUND
        )
    finally:
        server.close()
        await server.wait_closed()
    assert isinstance(client, tinker.ServiceClient)
