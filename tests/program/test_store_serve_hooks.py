"""``agl store serve --rollout-hooks module:name``: the operator's hooks run around every rollout the
served store keeps, whoever enqueues it over HTTP and whichever runner reports it; a wrong name is refused
before serving."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from agl_core.store.http import LightningStoreClient
from tests.store.http._support import child_env, free_port, wait_healthy

HOOKS = """
import agl_core as agl

class Grade(agl.RolloutHooks):
    async def on_enqueue(self, request):
        return request.model_copy(update={"metadata": {"tagged": "yes"}})

    async def on_succeeded(self, *, rollout, attempt_id, store):
        await store.update_rollout(rollout.rollout_id, metadata={**rollout.metadata, "graded": attempt_id})

    async def on_failed(self, *, rollout, store):
        await store.update_rollout(rollout.rollout_id, metadata={**rollout.metadata, "seen_failed": True})

instance = Grade()
not_hooks = {"a": "dict"}
"""


def _serve(cwd: Path, port: int, *extra: str) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "agl_core.cli", "store", "serve", "--store", "memory:"]
    return subprocess.Popen(
        [*command, "--port", str(port), "--log-level", "WARNING", *extra],
        cwd=cwd,
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.parametrize("target", ["grading:Grade", "grading:instance"])
def test_served_store_runs_the_operators_rollout_hooks(tmp_path: Path, target: str) -> None:
    (tmp_path / "grading.py").write_text(HOOKS)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    process = _serve(tmp_path, port, "--rollout-hooks", target)
    try:
        wait_healthy(url, process)

        async def lifecycle() -> tuple[dict[str, object], dict[str, object], str]:
            client = LightningStoreClient(url)
            try:
                ok = await client.enqueue_rollout({"q": 1})
                bad = await client.enqueue_rollout({"q": 2})
                first = await client.dequeue_rollout(worker_id="w")
                second = await client.dequeue_rollout(worker_id="w")
                assert first is not None and second is not None
                by_id = {first.rollout_id: first, second.rollout_id: second}
                attempt = by_id[ok.rollout_id].attempt.attempt_id
                await client.update_attempt(ok.rollout_id, attempt, status="succeeded")
                await client.update_attempt(
                    bad.rollout_id, by_id[bad.rollout_id].attempt.attempt_id, status="failed"
                )
                done, failed = (
                    await client.get_rollout_by_id(ok.rollout_id),
                    await client.get_rollout_by_id(bad.rollout_id),
                )
                assert done is not None and failed is not None
                return dict(done.metadata or {}), dict(failed.metadata or {}), attempt
            finally:
                await client.close()

        done, failed, attempt = asyncio.run(lifecycle())
        process.terminate()
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate(timeout=30)
    assert done == {"tagged": "yes", "graded": attempt}
    assert failed == {"tagged": "yes", "seen_failed": True}
    assert "with rollout hooks Grade" in out, (out, err)


@pytest.mark.parametrize(
    ("target", "says"),
    [
        ("grading:missing", "cannot import rollout hooks 'grading:missing'"),
        ("no_such_module:Grade", "cannot import rollout hooks 'no_such_module:Grade'"),
        ("grading:not_hooks", "'grading:not_hooks' is a dict, not rollout hooks"),
    ],
)
def test_a_wrong_hooks_name_is_refused_before_serving(tmp_path: Path, target: str, says: str) -> None:
    (tmp_path / "grading.py").write_text(HOOKS)
    process = _serve(tmp_path, free_port(), "--rollout-hooks", target)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 2, (out, err)
    assert says in err and "--rollout-hooks" in err and "Traceback" not in err
    assert "serving" not in out
