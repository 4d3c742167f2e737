"""Browser fixtures: a store filled by a real training loop, `agl store serve` on it, and Chromium.

Needs Playwright for Python and a Chromium binary (Debian's ``chromium``; ``AGL_CHROMIUM`` overrides the
path). ``make test-dashboard`` installs both; elsewhere these tests skip unless
``AGL_DASHBOARD_BROWSER=required`` (set by that target), which turns a missing browser into a failure.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest

REQUIRED = os.environ.get("AGL_DASHBOARD_BROWSER") == "required"
TOKEN = "dashboard-test-token"
ROOT = Path(__file__).resolve().parents[3]
T = TypeVar("T")


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to the end in a thread of its own (this thread's loop belongs to Playwright)."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(coro)
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=target)
    thread.start()
    thread.join(timeout=120)
    if "error" in box:
        raise box["error"]
    return box["value"]


def _chromium() -> str | None:
    for candidate in (os.environ.get("AGL_CHROMIUM"), "chromium", "chromium-browser"):
        if candidate and (found := shutil.which(candidate)):
            return found
    return None


def _need(what: str) -> None:
    if REQUIRED:
        pytest.fail(f"{what} (make test-dashboard installs it; see docs/dashboard.md)")
    pytest.skip(what)


try:
    from playwright.sync_api import Browser, Page, sync_playwright
except ImportError:  # pragma: no cover - depends on the venv
    sync_playwright = None  # type: ignore[assignment]


@dataclass
class Served:
    """The running store server and the ids of the special rollouts in it."""

    url: str
    store_path: Path
    ids: dict[str, str]


@pytest.fixture(scope="session")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """`agl store serve` (with a token) on a SQLite store filled by the baseline agent's training loop."""
    path = tmp_path_factory.mktemp("dash") / "store.db"
    # In a child process: Playwright's sync API keeps an event loop running in this one.
    filled = subprocess.run(
        [sys.executable, "-m", "tests.dashboard.fill", str(path)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=ROOT,
    )
    assert filled.returncode == 0, filled.stderr[-3000:]
    ids = json.loads(filled.stdout.strip().splitlines()[-1])
    env = {**os.environ, "AGL_STORE_TOKEN": TOKEN}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agl_core.cli",
            "store",
            "serve",
            "--store",
            f"sqlite:///{path}",
            "--port",
            "0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    url = None
    for line in proc.stdout:  # bounded: the server prints its address or exits
        found = re.search(r"at (http://127\.0\.0\.1:\d+)", line)
        if found:
            url = found.group(1)
            break
    if url is None:
        proc.kill()
        pytest.fail("agl store serve did not start")
    try:
        yield Served(url, path, ids)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    """Chromium driven by Playwright (headless)."""
    if sync_playwright is None:
        _need("playwright is not installed")
    executable = _chromium()
    if executable is None:
        _need("no chromium binary (apt-get install chromium)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=executable, headless=True, args=["--no-sandbox"])
        yield b
        b.close()


@dataclass
class PageWatch:
    """A page with the token in its session and every console error / page error / dialog recorded."""

    page: Page
    errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)


@pytest.fixture
def watched(browser: Browser, served: Served) -> Iterator[PageWatch]:
    """A fresh tab that already holds the store token (as after typing it once)."""
    context = browser.new_context(viewport={"width": 1280, "height": 900}, base_url=served.url)
    context.add_init_script(f"sessionStorage.setItem('agl.dashboard.token', {TOKEN!r})")
    page = context.new_page()
    watch = PageWatch(page)
    page.on("console", lambda m: watch.errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: watch.errors.append(f"pageerror: {e}"))

    def on_dialog(dialog: Any) -> None:
        watch.dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", on_dialog)
    yield watch
    context.close()


@pytest.fixture(scope="session")
def screenshot_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where each view's screenshot goes: $AGL_DASHBOARD_SCREENSHOTS (e.g. docs/dashboard) or a temp dir."""
    target = os.environ.get("AGL_DASHBOARD_SCREENSHOTS")
    path = Path(target) if target else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path
