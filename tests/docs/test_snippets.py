"""Every code block of the documentation is run, checked against its source, or skipped with a reason.

See `agl_testing.doc_blocks` for the markers. A page's blocks to run (and its hidden setups) run in
order in a fresh interpreter, in a scratch folder, offline, with no third-party plugin loaded; skipped
blocks are reported one by one with their reason (``pytest -rs``).

The plugin pages of the site are the plugins' READMEs (tools/docs_site.py): here every block of each is
checked for its marker and its excerpts; each plugin's own suite runs its README's blocks in its venv
(``tests/test_readme.py``, with `agl_testing.doc_blocks.check_page_runs`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agl_testing.doc_blocks import (
    Block,
    check_page_runs,
    excerpt_found,
    excerpt_problems,
    page_blocks,
    run_page,
    skipped_blocks,
)
from tests.docs.conftest import DOCS_DIR, REPO_ROOT

TIMEOUT_SECONDS = 600

PENDING_PAGES: dict[str, str] = {}
"""Pages whose unmarked blocks are reported as skipped instead of failing (name -> why)."""


def all_pages() -> list[Path]:
    return sorted(DOCS_DIR.rglob("*.md"))


def plugin_readmes() -> list[Path]:
    return sorted(REPO_ROOT.glob("plugins/agl-*/README.md"))


def all_blocks() -> list[Block]:
    return [block for page in all_pages() for block in page_blocks(page)]


def test_every_code_block_is_run_checked_or_skipped_with_a_reason() -> None:
    pages = all_pages() + plugin_readmes()
    unmarked = [
        b.where
        for p in pages
        for b in page_blocks(p)
        if b.action == "unmarked" and p.name not in PENDING_PAGES
    ]
    assert not unmarked, (
        "code blocks without <!-- docs-test -->, <!-- docs-skip: reason --> or <!-- docs-excerpt: path -->"
        f" on the line before: {unmarked}"
    )
    run = [b for b in all_blocks() if b.action == "test"]
    assert len(run) >= 20, [b.where for b in run]  # most blocks run: a skip needs a reason it cannot


@pytest.mark.parametrize("readme", plugin_readmes(), ids=lambda p: p.parent.name)
def test_each_plugin_runs_its_readme_blocks_in_its_own_suite(readme: Path) -> None:
    test_file = readme.parent / "tests" / "test_readme.py"
    assert test_file.is_file() and "check_page_runs" in test_file.read_text(encoding="utf-8"), (
        f"{readme.parent.name}: add tests/test_readme.py running README.md with "
        "agl_testing.doc_blocks.check_page_runs (copy agl-tinker's)"
    )


@pytest.mark.parametrize("readme", plugin_readmes(), ids=lambda p: p.parent.name)
def test_plugin_readme_excerpts_match_their_sources(readme: Path) -> None:
    assert not excerpt_problems(readme)


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
    # no third-party plugin; the repository importable (pages may use its examples)
    env = {"AGL_LOAD_PLUGINS": "", "PYTHONPATH": str(REPO_ROOT)}
    run = run_page(page, tmp_path, env=env, timeout=TIMEOUT_SECONDS)
    assert not run.problems(), "\n".join(run.problems())


def _skipped() -> list[tuple[Block, str]]:
    skipped = [entry for page in all_pages() for entry in skipped_blocks(page)]
    pending = [
        (b, PENDING_PAGES[b.page.name])
        for b in all_blocks()
        if b.action == "unmarked" and b.page.name in PENDING_PAGES
    ]
    return skipped + pending


@pytest.mark.parametrize("skipped", _skipped(), ids=lambda entry: entry[0].where)
def test_skipped_block(skipped: tuple[Block, str]) -> None:
    block, reason = skipped
    pytest.skip(f"{block.where}: {reason}")


@pytest.mark.parametrize("page", all_pages(), ids=lambda p: p.relative_to(DOCS_DIR).as_posix())
def test_excerpts_match_their_sources(page: Path) -> None:
    assert not excerpt_problems(page)


@pytest.mark.slow
def test_readme_blocks_run(tmp_path: Path) -> None:
    # the repository's landing page: its commands work verbatim (issue 39: the store commands did not)
    env = {"AGL_LOAD_PLUGINS": "", "PYTHONPATH": str(REPO_ROOT)}
    check_page_runs(REPO_ROOT / "README.md", tmp_path, env=env, timeout=TIMEOUT_SECONDS)
