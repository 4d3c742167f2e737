"""AgentOps set up in a fresh process: by agl (nothing is sent) or by the application (agl attaches)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from .fake_agentops import API_KEY, TOKEN, FakeAgentOpsServer

PLUGIN_DIR = Path(__file__).resolve().parents[1]
ROLLOUT_BOUND_S = 3.0


def run_scenario(name: str, server: FakeAgentOpsServer, cwd: Path) -> dict[str, Any]:
    """Run ``tests.scenarios NAME`` in a fresh interpreter working in ``cwd``; return its JSON line."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(PLUGIN_DIR), os.environ.get("PYTHONPATH")])),
        "AGENTOPS_API_KEY": API_KEY,
        "AGENTOPS_API_ENDPOINT": server.url,
        "AGENTOPS_EXPORTER_ENDPOINT": server.traces_url,
    }
    out = subprocess.run(
        [sys.executable, "-m", "tests.scenarios", name],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_agl_managed_agentops_sends_nothing_from_init_to_exit_even_with_a_key_configured(
    tmp_path: Path,
) -> None:
    with FakeAgentOpsServer() as server:
        result = run_scenario("managed_default", server, tmp_path)
        received = server.paths()  # the child has exited: its atexit handlers ran too
    assert result["mode"] == "managed"
    assert result["stored"] == ["agentlightning.annotation", "openai.chat.completion", "scenario.session"]
    assert result["token_ids"] == [True]
    assert received == []
    assert list(tmp_path.iterdir()) == []  # AgentOps' own setup would have written agentops.log here


def test_agl_attaches_to_agentops_initialized_by_the_application(tmp_path: Path) -> None:
    with FakeAgentOpsServer() as server:
        result = run_scenario("external", server, tmp_path)
        traces = [r for r in server.received if r.path == "/v1/traces"]
        exported = sorted(s.name for s in server.spans)
    assert "call agentops.init(...) before init_worker()" in result["before_init"]
    assert result["mode"] == "external"
    assert result["rollout_s"] < ROLLOUT_BOUND_S
    assert result["stored"] == ["agentlightning.annotation", "openai.chat.completion", "scenario.session"]
    assert result["token_ids"] == [True]
    # AgentOps' own exporter (repaired by agl when the installed OpenTelemetry broke it) delivered the
    # spans AgentOps created, with the token AgentOps obtained itself.
    assert result["flushed"] is True
    assert {"openai.chat.completion", "scenario.session"} <= set(exported)
    assert traces and {r.headers["Authorization"] for r in traces} == {f"Bearer {TOKEN}"}
