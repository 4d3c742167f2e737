"""Build every wheel and sdist (agl-core and each plugin) and check what they hold.

Each distribution carries the MIT LICENSE, its ``py.typed``, the root's project URLs (none while the project
has no public home) and Python-version classifiers; a long description whose links work on PyPI;
an sdist holds only its own distribution (agl-core's none of plugins/, tests/, bench/, examples/, .ci);
no development tool is a published extra; and ``twine check`` accepts every file.
"""

from __future__ import annotations

import email
import re
import subprocess
import sys
import tarfile
import zipfile
from email.message import Message
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[2]
PROJECTS = [ROOT, *sorted(path.parent for path in ROOT.glob("plugins/*/pyproject.toml"))]
PYTHON_VERSIONS = ("3.10", "3.11", "3.12", "3.13")
DEV_TOOLS = ("ruff", "hatchling", "twine", "mypy")
RELATIVE_LINK = re.compile(r"\]\((?!https?://|#)([^)\s]+)\)|<img[^>]+src=\"(?!https?://)([^\"]+)\"")
"""A Markdown link or image (or an HTML image) whose target is not an absolute URL or an anchor."""

pytestmark = pytest.mark.slow


def _package_name(project: Path) -> str:
    if project == ROOT:
        return "agl_core"
    if project.name == "agentlightning-agl":  # provides 0.3's import name (a replacement of agentlightning)
        return "agentlightning"
    return project.name.replace("-", "_")


def _distribution_name(project: Path) -> str:
    return "agl-core" if project == ROOT else project.name


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    """distribution name -> (wheel, sdist), built with hatchling (no isolation, no network)."""
    out = tmp_path_factory.mktemp("dist")
    result: dict[str, tuple[Path, Path]] = {}
    for project in PROJECTS:
        target = out / project.name
        subprocess.run(
            [sys.executable, "-m", "hatchling", "build", "-d", str(target)],
            cwd=project,
            check=True,
            capture_output=True,
            timeout=300,
        )
        (wheel,) = target.glob("*.whl")
        (sdist,) = target.glob("*.tar.gz")
        result[_distribution_name(project)] = (wheel, sdist)
    return result


def _wheel_metadata(wheel: Path) -> tuple[list[str], Message]:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        (metadata_name,) = [name for name in names if name.endswith(".dist-info/METADATA")]
        return names, email.message_from_bytes(archive.read(metadata_name))


def _sdist_names(sdist: Path) -> list[str]:
    with tarfile.open(sdist) as archive:
        # drop the leading "<name>-<version>/" directory
        return [member.name.split("/", 1)[1] for member in archive.getmembers() if "/" in member.name]


@pytest.mark.parametrize("project", PROJECTS, ids=_distribution_name)
def test_wheel_contents_and_metadata(built: dict[str, tuple[Path, Path]], project: Path) -> None:
    wheel, _ = built[_distribution_name(project)]
    names, metadata = _wheel_metadata(wheel)
    package = _package_name(project)
    licenses = [name for name in names if name.endswith(".dist-info/licenses/LICENSE")]
    assert licenses, f"{wheel.name} carries no LICENSE: {names}"
    with zipfile.ZipFile(wheel) as archive:
        assert archive.read(licenses[0]) == (ROOT / "LICENSE").read_bytes()
    assert f"{package}/py.typed" in names
    if project == ROOT:  # `agl plugins new` reads its templates from the installed package
        assert "agl_core/cli/scaffold/templates/store/store.py.tmpl" in names
    assert all(name.startswith((f"{package}/", f"{wheel.name.split('-')[0]}-")) for name in names), names
    assert not [name for name in names if "__pycache__" in name or name.endswith(".pyc")]
    assert metadata["License-Expression"] == "MIT"
    assert metadata.get_all("License-File") == ["LICENSE"]
    classifiers = metadata.get_all("Classifier") or []
    for version in PYTHON_VERSIONS:
        assert f"Programming Language :: Python :: {version}" in classifiers
    urls = dict(url.split(", ", 1) for url in metadata.get_all("Project-URL") or [])
    with (ROOT / "pyproject.toml").open("rb") as f:
        assert urls == tomllib.load(f)["project"].get("urls", {})  # the one source (none until real)
    requirements = [
        req.split(";")[0].split(">")[0].split("=")[0].strip()
        for req in metadata.get_all("Requires-Dist") or []
    ]
    assert not [tool for tool in DEV_TOOLS if tool in requirements], requirements
    description = metadata.get_payload()
    assert isinstance(description, str) and description.strip(), wheel.name
    relative = RELATIVE_LINK.findall(description)
    assert not relative, f"{wheel.name}: links PyPI cannot follow in the long description: {relative}"
    assert "make demo" not in description, "the long description is for pip users, not for a clone"


@pytest.mark.parametrize("project", PROJECTS, ids=_distribution_name)
def test_sdist_holds_only_its_distribution(built: dict[str, tuple[Path, Path]], project: Path) -> None:
    _, sdist = built[_distribution_name(project)]
    names = _sdist_names(sdist)
    top_level = {name.split("/")[0] for name in names}
    package = _package_name(project)
    assert {"LICENSE", "README.md", "pyproject.toml", "PKG-INFO", package} <= top_level, top_level
    assert "tests" not in top_level  # they need the repository (fixtures, fake servers, examples)
    assert f"{package}/py.typed" in names
    assert not [name for name in names if "__pycache__" in name or name.endswith(".pyc")]
    if project == ROOT:
        assert "CHANGELOG.md" in top_level
        assert not top_level & {"plugins", "tests", "bench", "examples", ".ci", "docs", "Makefile"}, top_level
    else:
        # hatchling always adds the repository's .gitignore (it names what a build leaves out)
        allowed = {"LICENSE", "README.md", "pyproject.toml", "PKG-INFO", ".gitignore", package}
        allowed |= {"requirements-pre.txt", "scripts"}
        assert top_level <= allowed, top_level - allowed


def test_every_license_copy_matches_the_repository_license() -> None:
    for project in PROJECTS:
        assert (project / "LICENSE").read_bytes() == (ROOT / "LICENSE").read_bytes(), project


def test_twine_accepts_every_distribution(built: dict[str, tuple[Path, Path]]) -> None:
    files = [str(path) for pair in built.values() for path in pair]
    result = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", *files],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
