"""One source for the version: ``__version__`` in agl_core/__init__.py, shared by every distribution."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import agl_core

tomllib = pytest.importorskip("tomllib")  # Python >= 3.11

ROOT = Path(__file__).resolve().parents[1]
PROJECTS = [ROOT, *sorted(p.parent for p in ROOT.glob("plugins/*/pyproject.toml"))]


@pytest.mark.parametrize("project", PROJECTS, ids=lambda p: p.name)
def test_every_distribution_takes_its_version_from_agl_core(project: Path) -> None:
    config = tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in config["project"], "write the version only in agl_core/__init__.py"
    assert config["project"]["dynamic"] == ["version"]
    source = (project / config["tool"]["hatch"]["version"]["path"]).resolve()
    assert source == ROOT / "agl_core" / "__init__.py"


def test_no_package_writes_a_version_literal() -> None:
    literal = re.compile(r"^__version__\s*=\s*['\"]", re.MULTILINE)
    packages = [ROOT / "agl_core", *ROOT.glob("plugins/*/agl_*")]
    writers = [
        str(path.relative_to(ROOT))
        for package in packages
        for path in package.rglob("*.py")
        if literal.search(path.read_text(encoding="utf-8"))
    ]
    assert writers == ["agl_core/__init__.py"]
    assert re.fullmatch(r"\d+\.\d+\.\d+([.\w-]*)?", agl_core.__version__)
