"""``agl plugins new``: each kind of plugin is generated, installed in a fresh venv, tested and checked."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agl_core.cli.scaffold import PLUGIN_KINDS, generate_plugin, plugin_names
from agl_testing import run_cli

ROOT = Path(__file__).resolve().parents[2]


def test_names_are_derived_from_the_given_name() -> None:
    names = plugin_names("agl-my-store")
    assert (names.name, names.dist, names.package, names.cls) == (
        "my-store",
        "agl-my-store",
        "agl_my_store",
        "MyStore",
    )
    assert plugin_names("redis").dist == "agl-redis"


@pytest.mark.parametrize("bad", ["", "Redis", "1store", "my_store", "my--store", "agl-", "a b"])
def test_an_unusable_name_is_refused_with_the_rule(bad: str) -> None:
    with pytest.raises(ValueError, match="lowercase letters, digits and single hyphens"):
        plugin_names(bad)


def test_the_command_refuses_an_existing_directory_and_an_unknown_kind(tmp_path: Path) -> None:
    target = tmp_path / "taken"
    target.mkdir()
    result = run_cli("plugins", "new", "redis", "--kind", "store", "--directory", str(target))
    assert result.exit_code == 3
    assert "already exists" in result.stderr
    assert list(target.iterdir()) == []
    result = run_cli("plugins", "new", "redis", "--kind", "database", "--directory", str(tmp_path / "x"))
    assert result.exit_code == 2
    assert not (tmp_path / "x").exists()


def test_the_command_writes_a_distribution(tmp_path: Path) -> None:
    target = tmp_path / "agl-redis"
    result = run_cli("plugins", "new", "redis", "--kind", "store", "--directory", str(target))
    assert result.exit_code == 0, result.stderr
    files = sorted(str(path.relative_to(target)) for path in target.rglob("*") if path.is_file())
    assert files == [
        "README.md",
        "agl_redis/__init__.py",
        "agl_redis/hooks.py",
        "agl_redis/py.typed",
        "agl_redis/store.py",
        "pyproject.toml",
        "tests/test_plugin.py",
        "tests/test_store.py",
    ]
    assert 'redis = "agl_redis.hooks"' in (target / "pyproject.toml").read_text()


@pytest.fixture(scope="module")
def plugin_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv seeing the test venv's packages (agl-core, pytest, hatchling), with every generated kind.

    ``--system-site-packages`` would expose the base interpreter's packages, not the test venv's, so a
    ``.pth`` file adds the test venv's site-packages instead (installing them again would take minutes).
    """
    base = tmp_path_factory.mktemp("scaffold")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    purelib = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout.strip()
    parent = [path for path in sys.path if path.endswith("site-packages")]
    # addsitedir (not a plain path line) so the test venv's own .pth files, e.g. agl-core's editable
    # install, are processed too
    lines = [f"import site; site.addsitedir({path!r})" for path in parent]
    (Path(purelib) / "agl_test_parent.pth").write_text("\n".join(lines) + "\n")
    python = venv / "bin" / "python"
    projects = []
    for kind in PLUGIN_KINDS:
        target = generate_plugin(f"gen-{kind}", kind, base / f"agl-gen-{kind}")
        projects.append(str(target))
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", *projects],
        check=True,
        timeout=600,
    )
    return base


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env["AGL_PLUGINS_STRICT"] = "1"
    return env


@pytest.mark.slow
def test_every_generated_kind_passes_its_own_tests_and_plugins_check(plugin_venv: Path) -> None:
    python = plugin_venv / "venv" / "bin" / "python"
    check = subprocess.run(
        [str(python), "-m", "agl_core.cli", "plugins", "check"],
        capture_output=True,
        text=True,
        timeout=300,
        env=_env(),
        cwd=plugin_venv,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    assert "no problems" in check.stdout
    listing = subprocess.run(
        [str(python), "-m", "agl_core.cli", "plugins", "list"],
        capture_output=True,
        text=True,
        timeout=300,
        env=_env(),
        cwd=plugin_venv,
    )
    for kind in PLUGIN_KINDS:
        assert f"gen-{kind}" in listing.stdout
    for kind in PLUGIN_KINDS:
        project = plugin_venv / f"agl-gen-{kind}"
        result = subprocess.run(
            [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x"],
            cwd=project,
            capture_output=True,
            text=True,
            timeout=600,
            env=_env(),
        )
        assert result.returncode == 0, f"{kind}:\n{result.stdout[-4000:]}\n{result.stderr[-2000:]}"
