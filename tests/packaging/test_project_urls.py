"""The project URLs have one source: the root ``pyproject.toml``; every plugin repeats them exactly."""

from __future__ import annotations

from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[2]
PLUGIN_PROJECTS = sorted(ROOT.glob("plugins/*/pyproject.toml"))


def _urls(pyproject: Path) -> dict[str, str]:
    return tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"].get("urls", {})


def test_every_plugin_has_the_root_project_urls() -> None:
    root = _urls(ROOT / "pyproject.toml")
    assert {"Homepage", "Repository", "Issues", "Changelog", "Documentation"} <= set(root), root
    assert PLUGIN_PROJECTS
    differing = {p.parent.name: _urls(p) for p in PLUGIN_PROJECTS if _urls(p) != root}
    assert not differing, f"copy [project.urls] from the root pyproject.toml into: {sorted(differing)}"


def test_urls_all_point_at_the_repository() -> None:
    root = _urls(ROOT / "pyproject.toml")
    repository = root["Repository"].rstrip("/")
    assert all(url.startswith(repository) for url in root.values()), root
