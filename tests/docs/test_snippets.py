"""Every Python block of the docs marked ``<!-- docs-test -->`` runs, offline, and its asserts hold.

Convention: put ``<!-- docs-test -->`` on the line right before a fenced ``python`` block. The marked
blocks of one page run in order as one script (later blocks see what earlier ones defined), in a fresh
interpreter with the working directory in a temporary folder and no third-party plugin loaded. Blocks
without the marker are illustrations (they may need a server, a GPU or a plugin) and are not run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.conftest import DOCS_DIR

MARKER = "<!-- docs-test -->"
_MARKED_BLOCK = re.compile(r"^<!-- docs-test -->\n```python\n(.*?)^```$", re.MULTILINE | re.DOTALL)
TIMEOUT_SECONDS = 300


def marked_blocks(markdown: str) -> list[str]:
    """The code of each ``python`` block right after a ``<!-- docs-test -->`` line, in page order."""
    return [match.group(1) for match in _MARKED_BLOCK.finditer(markdown)]


def pages_with_snippets() -> list[Path]:
    return sorted(p for p in DOCS_DIR.rglob("*.md") if MARKER in p.read_text(encoding="utf-8"))


def test_the_marker_is_found_on_pages_that_use_it() -> None:
    pages = pages_with_snippets()
    assert len(pages) >= 3, pages
    for page in pages:
        text = page.read_text(encoding="utf-8")
        # a marker not followed by a python block is a mistake the runner would silently skip
        assert text.count(MARKER) == len(marked_blocks(text)), (
            f"{page}: a {MARKER} line must precede ```python"
        )


def test_marked_blocks_extracts_only_marked_python_blocks() -> None:
    text = "```python\nskipped = 1\n```\n\n<!-- docs-test -->\n```python\nran = 2\n```\n"
    assert marked_blocks(text) == ["ran = 2\n"]


@pytest.mark.parametrize("page", pages_with_snippets(), ids=lambda p: p.relative_to(DOCS_DIR).as_posix())
def test_page_snippets_run(page: Path, tmp_path: Path) -> None:
    script = tmp_path / "snippets.py"
    script.write_text("\n\n".join(marked_blocks(page.read_text(encoding="utf-8"))), encoding="utf-8")
    env = {**os.environ, "AGL_LOAD_PLUGINS": "", "PYTHONPATH": str(DOCS_DIR.parent)}
    result = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_SECONDS,
    )
    assert result.returncode == 0, f"{page.name} snippets failed:\n{result.stdout}\n{result.stderr}"
