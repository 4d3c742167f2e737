"""Every code block of the documentation is run, checked against its source, or skipped with a reason.

See `tests.docs.snippets` for the markers. A page's blocks to run (and its hidden setups) run in order in
a fresh interpreter (`tests/docs/run_snippets.py`), in a scratch folder, offline, with no third-party
plugin loaded; skipped blocks are reported one by one with their reason (``pytest -rs``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.conftest import DOCS_DIR, REPO_ROOT
from tests.docs.snippets import Block, excerpt_found, page_blocks

TIMEOUT_SECONDS = 600
RUNNER = Path(__file__).with_name("run_snippets.py")

PENDING_PAGES: dict[str, str] = {}
"""Pages whose unmarked blocks are reported as skipped instead of failing (name -> why)."""


def all_pages() -> list[Path]:
    return sorted(DOCS_DIR.rglob("*.md"))


def all_blocks() -> list[Block]:
    return [block for page in all_pages() for block in page_blocks(page)]


def _id(block: Block) -> str:
    return f"{block.page.relative_to(DOCS_DIR).as_posix()}:{block.line}"


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


def _missing(modules: str) -> list[str]:
    return [m for m in modules.split(",") if m and not _importable(m)]


def test_every_code_block_is_run_checked_or_skipped_with_a_reason() -> None:
    unmarked = [_id(b) for b in all_blocks() if b.action == "unmarked" and b.page.name not in PENDING_PAGES]
    assert not unmarked, (
        "code blocks without <!-- docs-test -->, <!-- docs-skip: reason --> or <!-- docs-excerpt: path -->"
        f" on the line before: {unmarked}"
    )
    run = [b for b in all_blocks() if b.action == "test"]
    assert len(run) >= 20, [_id(b) for b in run]  # most blocks run: a skip needs a reason it cannot


def test_page_blocks_reads_markers_setups_and_indented_fences(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "```python\nunmarked = 1\n```\n\n"
        "<!-- docs-setup\nhidden = 2\n-->\n"
        "<!-- docs-test -->\n```python\nran = 3\n```\n"
        "- item\n\n  <!-- docs-skip: needs a GPU -->\n  ```bash\n  nvidia-smi\n  ```\n"
        "<!-- docs-excerpt: src/x.py -->\n```python\nx = 1\n```\n"
        "```\nplain output\n```\n",
        encoding="utf-8",
    )
    blocks = [(b.action, b.code, b.detail) for b in page_blocks(page)]
    assert blocks == [
        ("unmarked", "unmarked = 1\n", ""),
        ("setup", "hidden = 2\n", ""),
        ("test", "ran = 3\n", ""),
        ("skip", "nvidia-smi\n", "needs a GPU"),
        ("excerpt", "x = 1\n", "src/x.py"),
        ("text", "plain output\n", ""),
    ]


def test_excerpt_found_needs_every_line_in_order() -> None:
    source = "def f():\n    a = 1\n    return a\n"
    assert excerpt_found("a = 1\nreturn a\n", source)
    assert not excerpt_found("return a\na = 1\n", source)
    assert not excerpt_found("a = 2\n", source)


def _pages_to_run() -> list[Path]:
    return [page for page in all_pages() if any(b.action == "test" for b in page_blocks(page))]


@pytest.mark.slow
@pytest.mark.parametrize("page", _pages_to_run(), ids=lambda p: p.relative_to(DOCS_DIR).as_posix())
def test_page_blocks_run(page: Path, tmp_path: Path) -> None:
    steps = []
    for block in page_blocks(page):
        if block.action == "test" and _missing(block.detail):
            # a block that needs a missing module is reported by test_skipped_block; later blocks still run
            continue
        if block.action in ("test", "setup"):
            # padded so that tracebacks name the page's own line numbers
            code = "\n" * block.line + block.code if block.lang in ("python", "py") else block.code
            steps.append({"where": _id(block), "file": block.page.name, "lang": block.lang, "code": code})
    steps_file = tmp_path / "steps.json"
    steps_file.write_text(json.dumps(steps), encoding="utf-8")
    venv_bin = str(Path(sys.executable).parent)
    env = {
        **os.environ,
        "AGL_LOAD_PLUGINS": "",
        "PYTHONPATH": str(REPO_ROOT),
        "PATH": venv_bin + os.pathsep + os.environ.get("PATH", ""),
        "NO_COLOR": "1",
    }
    env.pop("AGL_STORE", None)
    env.pop("AGL_STORE_TOKEN", None)
    result = subprocess.run(
        [sys.executable, str(RUNNER), str(steps_file)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_SECONDS,
    )
    assert result.returncode == 0, f"{page.name}:\n{result.stdout}\n{result.stderr}"
    ran = [b for b in page_blocks(page) if b.action == "test" and not _missing(b.detail)]
    for block in ran:  # every block was reached (a block cannot silently stop the page)
        assert f"--- docs block {_id(block)} " in result.stdout


def _skipped() -> list[Block]:
    skipped = [b for b in all_blocks() if b.action == "skip" or (b.action == "test" and b.detail)]
    pending = [b for b in all_blocks() if b.action == "unmarked" and b.page.name in PENDING_PAGES]
    return skipped + pending


@pytest.mark.parametrize("block", _skipped(), ids=_id)
def test_skipped_block(block: Block) -> None:
    if block.action == "test":
        missing = _missing(block.detail)
        if not missing:
            return  # it ran in test_page_blocks_run
        pytest.skip(f"{_id(block)}: needs {', '.join(missing)} (not installed here)")
    if block.action == "unmarked":
        pytest.skip(f"{_id(block)}: {PENDING_PAGES[block.page.name]}")
    pytest.skip(f"{_id(block)}: {block.detail}")


@pytest.mark.parametrize("block", [b for b in all_blocks() if b.action == "excerpt"], ids=_id)
def test_excerpt_matches_its_source(block: Block) -> None:
    source = REPO_ROOT / block.detail
    assert source.is_file(), f"{_id(block)} names {block.detail}, which does not exist"
    assert excerpt_found(block.code, source.read_text(encoding="utf-8")), (
        f"{_id(block)} is no longer an excerpt of {block.detail}: update the page"
    )
