"""The project URLs have one source: the root ``pyproject.toml``; every plugin carries an exact copy.

A plugin's sdist must build alone, so its pyproject holds the table itself; ``tools/sync_project_urls.py``
writes those copies from the root's (or removes them while the root has none), and these tests fail when
one drifts or a placeholder URL comes back.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[2]
PLUGIN_PROJECTS = sorted(ROOT.glob("plugins/*/pyproject.toml"))


@pytest.fixture(scope="module")
def sync_tool() -> ModuleType:
    """tools/sync_project_urls.py, imported from its file (tools/ is not a package)."""
    spec = importlib.util.spec_from_file_location(
        "agl_sync_project_urls", ROOT / "tools" / "sync_project_urls.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _urls(pyproject: Path) -> dict[str, str]:
    return tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"].get("urls", {})


PLACEHOLDER_HOSTS = ("github.com/agl-dev/", "example.org", "example.com")
"""URLs that stand for a home the project does not have (issue 39: all ten wheels carried them)."""


def test_every_plugin_has_the_root_project_urls(sync_tool: ModuleType) -> None:
    assert PLUGIN_PROJECTS
    stale = sync_tool.stale_plugins(ROOT, write=False)
    assert not stale, f"run `python tools/sync_project_urls.py` (root [project.urls] -> plugins): {stale}"


def test_no_project_url_is_a_placeholder() -> None:
    for pyproject in (ROOT / "pyproject.toml", *PLUGIN_PROJECTS):
        urls = _urls(pyproject)
        assert not [url for url in urls.values() if any(host in url for host in PLACEHOLDER_HOSTS)], pyproject
        if urls:  # a real home: every link under its repository
            repository = urls["Repository"].rstrip("/")
            assert all(url.startswith(repository) for url in urls.values()), (pyproject, urls)


ROOT_URLS = '[project.urls]\nHomepage = "https://agl.invalid"\nRepository = "https://agl.invalid/src"\n\n'


def test_sync_rewrites_a_stale_copy_and_adds_a_missing_one(sync_tool: ModuleType, tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "agl-core"\n\n' + ROOT_URLS, encoding="utf-8")
    stale = tmp_path / "plugins" / "agl-stale" / "pyproject.toml"
    missing = tmp_path / "plugins" / "agl-missing" / "pyproject.toml"
    for path in (stale, missing):
        path.parent.mkdir(parents=True)
    stale.write_text(
        '[project]\nname = "agl-stale"\n\n[project.urls]\nHomepage = "https://example.org/old"\n\n'
        '[project.entry-points.agl]\nstale = "agl_stale.hooks"\n',
        encoding="utf-8",
    )
    missing.write_text('[project]\nname = "agl-missing"\n\n[tool.x]\ny = 1\n', encoding="utf-8")

    assert sync_tool.stale_plugins(tmp_path, write=True) == [missing, stale]

    root_urls = _urls(tmp_path / "pyproject.toml")
    for path in (stale, missing):
        assert _urls(path) == root_urls
    assert tomllib.loads(stale.read_text())["project"]["entry-points"]["agl"] == {"stale": "agl_stale.hooks"}
    assert tomllib.loads(missing.read_text())["tool"] == {"x": {"y": 1}}
    assert sync_tool.stale_plugins(tmp_path, write=False) == []

    # the root drops its table: the copies go too, the rest of each file stays
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "agl-core"\n', encoding="utf-8")
    assert sync_tool.stale_plugins(tmp_path, write=True) == [missing, stale]
    for path in (stale, missing):
        assert _urls(path) == {}
    assert tomllib.loads(stale.read_text())["project"]["entry-points"]["agl"] == {"stale": "agl_stale.hooks"}
    assert sync_tool.stale_plugins(tmp_path, write=False) == []
