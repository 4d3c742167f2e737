"""The README (also the site's agl-agentops page): its code blocks run here, or are skipped with a reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from agl_testing.doc_blocks import Block, check_page_runs, skipped_blocks

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_blocks_run(tmp_path: Path) -> None:
    check_page_runs(README, tmp_path)


@pytest.mark.parametrize("skipped", skipped_blocks(README), ids=lambda entry: entry[0].where)
def test_readme_block_skipped(skipped: tuple[Block, str]) -> None:
    block, reason = skipped
    pytest.skip(f"{block.where}: {reason}")
