"""A span naming an absurd attribute index (``agentlightning.reward.4294967294.value``) must not freeze
the dashboard: the page builds no array from such an index (issue 34)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.dashboard.browser.conftest import REQUIRED, run_async

if not REQUIRED:
    pytest.importorskip("playwright")
from playwright.sync_api import Browser, expect

from agl_core.store.http import BackgroundServer, LightningStoreClient
from agl_core.store.memory import InMemoryLightningStore
from agl_testing.store_conformance import make_span

pytestmark = pytest.mark.slow
BOUND_MS = 20_000


@pytest.fixture
def sparse_store() -> Iterator[tuple[str, str]]:
    """A server whose one rollout has a span with a reward at index 4294967294 and a message at 10**9."""
    with BackgroundServer(InMemoryLightningStore) as server:

        async def fill() -> str:
            client = LightningStoreClient(server.endpoint)
            started = await client.start_rollout({"task": "sparse"})
            attributes = {
                "agentlightning.reward.4294967294.value": 1.0,
                "agentlightning.reward.4294967294.name": "far",
                "gen_ai.prompt.1000000000.content": "far away",
                "gen_ai.prompt.1000000000.role": "user",
            }
            span = make_span(started.rollout_id, started.attempt.attempt_id, 1, attributes=attributes)
            await client.add_span(span)
            await client.update_rollout(started.rollout_id, status="succeeded")
            await client.close()
            return started.rollout_id

        yield server.endpoint, run_async(fill())


def test_a_reward_at_index_4294967294_does_not_freeze_the_pages(
    browser: Browser, sparse_store: tuple[str, str]
) -> None:
    url, rollout_id = sparse_store
    context = browser.new_context(base_url=url)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        started = time.monotonic()
        page.goto("/")
        row = page.locator(f"#rollouts tbody tr[data-rollout='{rollout_id}']")
        expect(row).to_be_visible(timeout=BOUND_MS)
        expect(row.locator("td.reward")).not_to_have_text("…", timeout=BOUND_MS)
        page.goto(f"/#/rollout/{rollout_id}")
        expect(page.locator("#span-tree .tree-row").first).to_be_visible(timeout=BOUND_MS)
        page.locator("#span-tree .tree-row").first.click()
        page.locator("#span-detail").wait_for(timeout=BOUND_MS)
        assert page.evaluate("1 + 1") == 2  # the page still runs scripts (bounded by the waits above)
        assert time.monotonic() - started < BOUND_MS / 1000
        assert errors == []
    finally:
        context.close()
