"""The README's (and PyPI's) table of distributions names every distribution the repository ships, so a new
plugin is not left out of what a new user reads first."""

from __future__ import annotations

import re

import pytest

from tests.docs.conftest import REPO_ROOT

DISTRIBUTIONS = sorted(
    re.findall(r'^name = "([a-z0-9-]+)"', path.read_text(), re.MULTILINE)[0]
    for path in REPO_ROOT.glob("plugins/*/pyproject.toml")
)


def table_rows(page: str) -> set[str]:
    """The distribution names of the rows ``| `name` | ... |`` of ``page``."""
    return set(re.findall(r"^\| `([a-z0-9-]+)` \|", (REPO_ROOT / page).read_text(), re.MULTILINE))


@pytest.mark.parametrize("page", ["README.md", "README.pypi.md"])
def test_the_distribution_table_lists_every_plugin(page: str) -> None:
    assert len(DISTRIBUTIONS) >= 10  # the glob reads the real plugins folder
    assert sorted(set(DISTRIBUTIONS) - table_rows(page)) == []
