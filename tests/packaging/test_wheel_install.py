"""The first hour, from wheels: a new user and a plugin author succeed without the repository (issue 39).

Every distribution is built; agl-core, agl's test kit (agl-testing, what a plugin author's tests use) and
each light plugin are installed from those wheels into a fresh venv outside the repository (dependencies
from the package index); there ``agl plugins list`` and ``agl plugins check`` pass (agl-testing is a
pytest plugin, not an agl one, so neither shows it) and the getting-started and writing-a-plugin pages'
blocks run. A few minutes, so it runs on its own: ``make test-wheels`` (part of ``make test``) sets
``AGL_TEST_WHEELS=1``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import venv
from pathlib import Path

import pytest

from agl_testing.doc_blocks import run_page

ROOT = Path(__file__).resolve().parents[2]
PROJECTS = [ROOT, *sorted(path.parent for path in ROOT.glob("plugins/*/pyproject.toml"))]
LIGHT_PLUGINS = ("agl-apo", "agl-legacy", "agl-mongo", "agl-postgres", "agl-verl")
"""Plugins whose dependencies install in seconds (no torch, Ray, Weave or AgentOps)."""
PAGES = ("getting-started.md", "writing-plugins.md")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        os.environ.get("AGL_TEST_WHEELS") != "1",
        reason="builds every distribution and installs them into a fresh venv: run `make test-wheels`",
    ),
]


def _clean_env(**extra: str) -> dict[str, str]:
    """This environment without what would let the venv see the repository or a user's store."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGL_", "PYTHON", "VIRTUAL_ENV"))}
    return {**env, **extra}


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Distribution name -> its wheel, every project built (wheel and sdist) into one folder."""
    out = tmp_path_factory.mktemp("dist")
    for project in PROJECTS:
        subprocess.run(
            [sys.executable, "-m", "hatchling", "build", "-d", str(out)],
            cwd=project,
            check=True,
            capture_output=True,
            timeout=300,
        )
    built = {path.name.split("-")[0].replace("_", "-"): path for path in out.glob("*.whl")}
    assert set(built) == {"agl-core", *(p.name for p in PROJECTS[1:])}, sorted(built)
    assert len(list(out.glob("*.tar.gz"))) == len(PROJECTS)
    return built


@pytest.fixture(scope="module")
def installed(wheels: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv outside the repository: agl-core, agl-testing and the light plugins; its bin folder."""
    home = tmp_path_factory.mktemp("first-hour")
    assert ROOT not in home.parents
    venv.create(home / "venv", with_pip=True)
    bin_dir = home / "venv" / "bin"
    requirements = [
        f"{name} @ {wheels[name].as_uri()}" for name in ("agl-core", "agl-testing", *LIGHT_PLUGINS)
    ]
    subprocess.run(
        [str(bin_dir / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", *requirements],
        cwd=home,
        env=_clean_env(),
        check=True,
        timeout=900,
    )
    return bin_dir


def _agl(bin_dir: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(bin_dir / "agl"), *args],
        cwd=bin_dir.parent.parent,
        env=_clean_env(**(env or {})),
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_installed_agl_is_the_wheel_not_the_repository(installed: Path) -> None:
    code = "import agl_core; print(agl_core.__file__)"
    done = subprocess.run(
        [str(installed / "python"), "-c", code],
        cwd=installed.parent.parent,
        env=_clean_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    assert str(installed.parent) in done.stdout and str(ROOT) not in done.stdout


def test_plugins_list_and_check_pass_with_every_light_plugin(installed: Path) -> None:
    listing = _agl(installed, "plugins", "list")
    assert listing.returncode == 0, listing.stdout + listing.stderr
    lines = listing.stdout.splitlines()
    assert lines[0].split() == ["Name", "Distribution", "Version", "Status", "Load", "Provides"]
    for name in LIGHT_PLUGINS:
        row = next((line for line in lines if f" {name} " in line), None)
        assert row is not None and " ok " in row, (name, listing.stdout)
    assert "agl-testing" not in listing.stdout  # a pytest plugin (entry point group pytest11), no agl one
    # agl-verl is installed without its `verl` extra: check names that one problem and the extra to install
    check = _agl(installed, "plugins", "check")
    assert check.returncode == 1, check.stdout + check.stderr
    assert "algorithm verl (agl-verl) needs verl" in check.stdout
    assert "hint: pip install 'agl-verl[verl]'" in check.stdout
    assert "1 problem(s) found" in check.stderr
    clean = _agl(
        installed, "plugins", "check", env={"AGL_DISABLE_PLUGINS": "verl", "AGL_PLUGINS_STRICT": "1"}
    )
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert f"{len(LIGHT_PLUGINS) - 1} plugin(s) ok, 1 disabled" in clean.stdout


def test_help_is_quick_and_lists_the_commands(installed: Path) -> None:
    started = time.perf_counter()
    done = _agl(installed, "--help")
    elapsed = time.perf_counter() - started
    assert done.returncode == 0 and "plugins" in done.stdout and "store" in done.stdout
    print(f"agl --help from the wheel: {elapsed:.3f} s")


@pytest.mark.parametrize("page", PAGES)
def test_first_hour_pages_run_from_the_wheels(installed: Path, page: str, tmp_path: Path) -> None:
    workdir = tmp_path / "scratch"
    env = {"AGL_LOAD_PLUGINS": "", "PYTHONPATH": ""}
    run = run_page(ROOT / "docs" / page, workdir, env=env, python=installed / "python", timeout=600)
    assert not run.problems(), "\n".join(run.problems())
