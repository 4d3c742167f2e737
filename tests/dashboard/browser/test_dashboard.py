"""The dashboard in Chromium: every view against a store a real training loop filled, click-through,
live updates, hostile span content, a 5,000-span rollout with a 10 MB span, and the token prompt."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.dashboard.browser.conftest import REQUIRED, TOKEN, PageWatch, Served, run_async
from tests.dashboard.fill import XSS_MARK

if not REQUIRED:
    pytest.importorskip("playwright")
from playwright.sync_api import Browser, expect

pytestmark = pytest.mark.slow
expect.set_options(timeout=60_000)  # generous bound for every wait on a slow shared machine


def assert_clean(watch: PageWatch) -> None:
    assert watch.errors == []
    assert watch.dialogs == []
    assert watch.page.evaluate(f"window.{XSS_MARK} === undefined")


def test_rollouts_view_lists_sorts_filters_and_pages(watched: PageWatch, screenshot_dir: Path) -> None:
    page = watched.page
    page.goto("/")
    rows = page.locator("#rollouts tbody tr")
    expect(rows.first).to_be_visible()
    expect(page.locator("#rollouts td.reward").first).not_to_have_text("…")
    assert rows.count() >= 16
    rewards = page.locator("#rollouts td.reward").all_inner_texts()
    assert {"1", "0"} <= set(rewards)  # the scripted model earns both rewards
    page.locator("th[data-col=status]").click()
    expect(page.locator("th[data-col=status]")).to_have_class("sortable sorted desc")
    page.select_option("#filter-status", ["cancelled"])
    expect(page.locator("#rollouts-summary")).to_contain_text("0 match")
    page.select_option("#filter-status", ["succeeded"])
    expect(rows.first).to_be_visible()
    page.select_option("#page-size", "10")
    expect(page.locator(".pager")).to_contain_text("1\u201310 of")
    page.locator("#next").click()
    expect(page.locator(".pager")).to_contain_text("11\u2013")
    page.locator("#prev").click()
    page.screenshot(path=str(screenshot_dir / "rollouts.png"))
    assert_clean(watched)


def test_mode_filter_keeps_only_that_mode(watched: PageWatch) -> None:
    page = watched.page
    page.goto("/")
    expect(page.locator("#rollouts tbody tr").first).to_be_visible()
    page.select_option("#filter-mode", "train")
    # the table is redrawn after the server answers: wait until no row of another mode is left
    mode_cells = page.locator("#rollouts tbody tr td:nth-child(3)")
    expect(mode_cells.filter(has_not_text=re.compile(r"^train$"))).to_have_count(0)
    modes = mode_cells.all_inner_texts()
    assert modes and set(modes) == {"train"}, modes
    # filtered by the server, not on the page
    expect(page.locator("#rollouts-summary")).to_contain_text("status/mode/id/input filters")
    expect(page.locator("#rollouts-summary")).not_to_contain_text("page match")
    page.select_option("#filter-mode", "")
    assert_clean(watched)


def test_input_filter_runs_on_the_server(watched: PageWatch, served: Served) -> None:
    page = watched.page
    page.goto("/")
    expect(page.locator("#rollouts tbody tr").first).to_be_visible()
    page.select_option("#page-size", "10")
    pager, rows = page.locator(".pager"), page.locator("#rollouts tbody tr")
    # ASCII letters in either case; the pager counts the matches of the whole store, not of one page
    page.fill("#filter-input", XSS_MARK.upper())
    expect(pager).to_contain_text("1\u20131 of 1")
    expect(rows).to_have_count(1)
    assert rows.first.get_attribute("data-rollout") == served.ids["hostile"]
    expect(page.locator("#rollouts-summary")).not_to_contain_text("page match")
    page.fill("#filter-input", "what is")
    expect(pager).to_contain_text(re.compile(r"1\u201310 of (1[1-9]|[2-9]\d)"))  # more than one page
    page.locator("#next").click()
    expect(pager).to_contain_text("11\u2013")
    inputs = page.locator("#rollouts tbody tr td.input").all_inner_texts()
    assert inputs and all("What is" in text for text in inputs), inputs
    page.fill("#filter-input", "")
    assert_clean(watched)


def test_click_rollout_attempt_span_llm_call(watched: PageWatch, screenshot_dir: Path) -> None:
    page = watched.page
    page.goto("/#/rollouts")
    page.fill("#filter-id", "")
    page.locator("#rollouts tbody[data-state=complete]").wait_for()
    rewarded = page.locator("td.reward", has_text=re.compile(r"^1$"))  # used the calculator tool
    link = page.locator("#rollouts tbody tr").filter(has_text="What is").filter(has=rewarded).first
    link.locator("a").click()
    expect(page.locator("#attempts .tl-row").first).to_be_visible()
    page.locator("#attempts .tl-row").first.click()
    llm_row = page.locator("#span-tree .tree-row").filter(has=page.locator(".tag.llm")).last
    expect(llm_row).to_be_visible()
    llm_row.click()
    detail = page.locator("#span-detail")
    expect(detail.locator(".msg.user")).to_contain_text("What is")
    expect(detail.locator(".msg.tool")).to_be_visible()  # the calculator's result, sent back to the model
    expect(detail.locator(".msg.assistant").first).to_be_visible()
    expect(page.locator("#doctor")).to_contain_text("training triplet")
    page.set_viewport_size({"width": 1280, "height": 1150})
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=str(screenshot_dir / "rollout.png"))
    detail.locator("#show-tokens").click()
    expect(detail.locator(".tokens")).to_contain_text("prompt token ids")
    expect(page.locator("#rewards")).to_contain_text("agentlightning.annotation")
    assert_clean(watched)


def test_each_model_call_is_one_llm_row_with_its_other_records_folded_under_it(
    watched: PageWatch, served: Served
) -> None:
    """Proxy and tracer both on (as `make demo`): 2 model calls, 4 records; the tree shows 2 LLM rows."""
    page = watched.page
    page.goto(f"/#/rollout/{served.ids['twice']}")
    expect(page.locator("#span-count")).to_contain_text("2 LLM call(s) in 4 record(s)")
    expect(page.locator("#doctor")).to_contain_text("2 LLM calls")
    tree = page.locator("#span-tree")
    expect(tree.locator(".tag.llm")).to_have_count(2)
    expect(tree.locator(".tag.llm-copy")).to_have_count(2)
    rows = tree.locator(".tree-row").evaluate_all(
        "els => els.map(e => [e.dataset.span, parseFloat(e.style.paddingLeft),"
        " e.querySelector('.tag.llm') ? 'read' : e.querySelector('.tag.llm-copy') ? 'copy' : ''])"
    )
    for index, (_, indent, kind) in enumerate(rows):
        if kind == "copy":  # right under the record read for its call, one level deeper
            _, read_indent, read_kind = rows[index - 1]
            assert read_kind == "read" and indent > read_indent, rows
    assert_clean(watched)


def test_live_updates_show_new_and_changed_rollouts(watched: PageWatch, served: Served) -> None:
    from agl_core.store.http.client import LightningStoreClient

    page = watched.page
    page.goto("/")
    expect(page.locator("#rollouts tbody tr").first).to_be_visible()

    async def start() -> str:
        client = LightningStoreClient(served.url, token=TOKEN)
        try:
            started = await client.start_rollout({"question": "live marker"}, mode="test")
            return started.rollout_id
        finally:
            await client.close()

    async def finish(rollout_id: str) -> None:
        client = LightningStoreClient(served.url, token=TOKEN)
        try:
            await client.update_rollout(rollout_id, status="succeeded")
        finally:
            await client.close()

    rollout_id = run_async(start())
    row = page.locator(f"#rollouts tr[data-rollout='{rollout_id}']")
    expect(row).to_contain_text("preparing")  # newest first: appears on the next refresh
    run_async(finish(rollout_id))
    expect(row).to_contain_text("succeeded")
    assert_clean(watched)


def test_hostile_span_content_is_shown_as_text_and_never_runs(watched: PageWatch, served: Served) -> None:
    page = watched.page
    page.goto(f"/#/rollout/{served.ids['hostile']}")
    rows = page.locator("#span-tree .tree-row")
    expect(rows.nth(3)).to_be_visible()
    expect(page.locator("#failures")).to_contain_text("ValueError")
    for i in range(rows.count()):
        rows.nth(i).click()
        page.locator("#span-detail").wait_for()
        for button in page.locator("#span-detail button").all():
            button.click()
    expect(page.locator("main")).to_contain_text("<script>")
    expect(page.locator("main")).to_contain_text("javascript:")
    assert page.locator("main script, main img, main iframe, main svg:not(.chart)").count() == 0
    hrefs = page.locator("main a").evaluate_all("els => els.map(e => e.getAttribute('href'))")
    assert all(h.startswith("#") for h in hrefs)
    page.goto("/#/training")
    expect(page.locator("#card-reward")).to_be_visible()
    assert_clean(watched)


def test_big_rollout_stays_usable(watched: PageWatch, served: Served) -> None:
    page = watched.page
    page.goto(f"/#/rollout/{served.ids['big']}")
    expect(page.locator("#span-count")).to_contain_text("5000 of 5000")
    rendered = page.locator("#span-tree .tree-row").count()
    assert 0 < rendered < 200  # only the rows in view are in the DOM
    page.locator("#span-tree .tree-row[data-span='0000000000000002']").click()
    expect(page.locator("#span-detail")).to_contain_text("show all 10.0 MB")
    page.locator("#span-tree").evaluate("el => { el.scrollTop = el.scrollHeight; }")
    expect(page.locator("#span-tree .tree-row").filter(has_text="step-5000")).to_be_visible()
    assert_clean(watched)


def test_resources_view_diffs_prompt_versions(watched: PageWatch, screenshot_dir: Path) -> None:
    page = watched.page
    page.goto("/#/resources")
    expect(page.locator("#resources tbody tr").nth(1)).to_be_visible()
    diff = page.locator("#resource-diff")
    expect(diff).to_contain_text("prompt (changed)")
    expect(diff.locator(".add").first).to_contain_text("careful")
    expect(diff.locator(".del").first).to_be_visible()
    expect(page.locator("#resources tbody tr").first).to_contain_text("ro-")
    page.screenshot(path=str(screenshot_dir / "resources.png"))
    assert_clean(watched)


def test_training_view_charts_rewards(watched: PageWatch, screenshot_dir: Path) -> None:
    page = watched.page
    page.goto("/#/training")
    expect(page.locator("#reward-time circle").first).to_be_attached()
    expect(page.locator("#reward-version rect").first).to_be_attached()
    expect(page.locator("#card-success")).to_contain_text("%")
    expect(page.locator("#card-tokens")).not_to_contain_text("0 / 0")
    page.screenshot(path=str(screenshot_dir / "training.png"))
    assert_clean(watched)


def test_workers_view(watched: PageWatch, screenshot_dir: Path) -> None:
    page = watched.page
    page.goto("/#/workers")
    expect(page.locator("#workers tbody tr").first).to_be_visible()
    # the training loop's runners finished rollouts: a worker shows a positive rate and finished attempts
    rates = page.locator("#workers td.throughput").all_inner_texts()
    assert any(re.fullmatch(r"\d+(\.\d+)?(e[+-]?\d+)?", r) and float(r) > 0 for r in rates), rates
    finished = [int(n) for n in page.locator("#workers td.finished").all_inner_texts()]
    assert sum(finished) > 0
    page.screenshot(path=str(screenshot_dir / "workers.png"))
    assert_clean(watched)


def test_token_is_asked_once_and_kept_for_the_tab(browser: Browser, served: Served) -> None:
    context = browser.new_context(base_url=served.url)
    page = context.new_page()
    page.goto("/")
    expect(page.locator("form.token")).to_be_visible()
    page.fill("#token", "wrong")
    page.locator("form.token button").click()
    expect(page.locator("form.token")).to_contain_text("not accepted")
    page.fill("#token", TOKEN)
    page.locator("form.token button").click()
    expect(page.locator("#rollouts tbody tr").first).to_be_visible()
    page.reload()
    expect(page.locator("#rollouts tbody tr").first).to_be_visible()  # kept for the tab
    assert page.evaluate("sessionStorage.getItem('agl.dashboard.token')") == TOKEN
    assert TOKEN not in page.url
    context.close()


def test_api_docs_page(watched: PageWatch) -> None:
    page = watched.page
    page.goto("/docs")
    expect(page.locator("#rollout_doctor")).to_contain_text("/v1/agl/rollouts/{rollout_id}/doctor")
    assert page.locator("details.op").count() > 30
    assert_clean(watched)
