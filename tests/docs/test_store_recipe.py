"""The persistent store of "Writing a plugin" (a JSON-lines journal through the narrow backend methods)
passes the store conformance suite, and a reopened journal holds the run as it was (issue 39).

The store is the page's block itself, executed here as a module, so the page and this test cannot drift.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from agl_core.store import LightningStore, open_store
from agl_core.types import LLM, Span
from agl_testing import plugin_module, register_plugin, use_plugin_manager
from agl_testing.clock import FakeClock
from agl_testing.doc_blocks import page_blocks
from agl_testing.store_conformance import StoreConformance, StoreFactory
from tests.docs.conftest import DOCS_DIR

PAGE = DOCS_DIR / "writing-plugins.md"


def _recipe() -> ModuleType:
    (block,) = [b for b in page_blocks(PAGE) if b.action == "test" and "class JsonlStore(" in b.code]
    module = ModuleType("jsonl_store_recipe")
    exec(compile(block.code, block.where, "exec"), module.__dict__)
    return module


RECIPE = _recipe()
JsonlStore: Any = RECIPE.JsonlStore


class TestJsonlStoreConformance(StoreConformance):
    concurrency_rollouts = 200  # the watchdog scans every rollout: a small store

    @pytest.fixture
    def store_factory(self, tmp_path: Path) -> StoreFactory:
        return lambda clock: JsonlStore(tmp_path / "run.jsonl", clock=clock, scan_debounce_seconds=0)


async def _everything(store: LightningStore) -> dict[str, Any]:
    """What a reader sees of a store, through its public methods."""
    rollouts = list(await store.query_rollouts())
    return {
        "rollouts": rollouts,
        "attempts": [list(await store.query_attempts(r.rollout_id)) for r in rollouts],
        "spans": [list(await store.query_spans(r.rollout_id)) for r in rollouts],
        "resources": list(await store.query_resources()),
        "latest": await store.get_latest_resources(),
        "workers": list(await store.query_workers()),
    }


async def test_a_reopened_journal_holds_the_run_as_it_was(tmp_path: Path) -> None:
    clock = FakeClock()
    path = tmp_path / "run.jsonl"
    store = JsonlStore(path, clock=clock, scan_debounce_seconds=0)
    await store.update_resources("main", {"llm": LLM(endpoint="http://127.0.0.1:1/v1", model="m")})
    retried = {"max_attempts": 2, "retry_condition": ["failed"]}
    first, second, third = await store.enqueue_many_rollouts(
        [{"input": {"n": n}, "mode": "train", "config": retried} for n in range(3)]
    )
    claimed = await store.dequeue_rollout(worker_id="w1")
    assert claimed is not None and claimed.rollout_id == first.rollout_id
    attempt_id = claimed.attempt.attempt_id
    spans = [
        Span.from_attributes(
            rollout_id=first.rollout_id,
            attempt_id=attempt_id,
            sequence_id=n,
            name=f"step-{n}",
            attributes={"gen_ai.prompt.0.content": "héllo \x00 wörld", "n": n},
        )
        for n in (1, 2)
    ]
    await store.add_many_spans(spans)
    await store.update_attempt(first.rollout_id, "latest", status="failed")  # retried: requeued
    await store.update_rollout(third.rollout_id, status="cancelled")
    await store.update_worker("w1", {"gpu": 0.5})
    clock.advance(3)
    before = await _everything(store)
    await store.close()

    reopened = JsonlStore(path, clock=clock, scan_debounce_seconds=0)
    assert await _everything(reopened) == before
    # the queue's order and the span sequence counters survive: the retry is behind the second rollout
    assert [r.rollout_id for r in await reopened.dequeue_many_rollouts(limit=10)] == [
        second.rollout_id,
        first.rollout_id,
    ]
    assert await reopened.get_next_span_sequence_id(first.rollout_id, attempt_id) == 3
    await reopened.close()
    assert [s.attributes["gen_ai.prompt.0.content"] for s in before["spans"][0]] == ["héllo \x00 wörld"] * 2


async def test_the_jsonl_scheme_opens_through_the_plugin_hook(tmp_path: Path, monkeypatch: Any) -> None:
    from agl_core.plugins import PluginManager

    monkeypatch.chdir(tmp_path)
    manager = PluginManager()
    plugin = plugin_module("jsonl", agl_register_stores=RECIPE.agl_register_stores)
    with use_plugin_manager(manager), register_plugin(manager, plugin, "jsonl"):
        relative = open_store("jsonl://runs/a.jsonl")
        absolute = open_store(f"jsonl://{tmp_path / 'b.jsonl'}")
    assert isinstance(relative, JsonlStore) and relative.path == Path("runs/a.jsonl")
    assert absolute.path == tmp_path / "b.jsonl" and (tmp_path / "runs").is_dir()
    await relative.close()
    await absolute.close()
