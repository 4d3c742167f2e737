"""A real third-party plugin distribution, pip-installed, seen by `agl` in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

GOOD_PYPROJECT = """
[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "agl-hello"
version = "2.5.0"
dependencies = []

[project.entry-points.agl]
hello = "agl_hello.hooks"

[tool.hatch.build.targets.wheel]
packages = ["agl_hello"]
"""

GOOD_HOOKS = '''
import click
from agl_core import hookimpl


@hookimpl
def agl_register_stores(registry):
    registry.add("hello", "agl_hello.store:HelloStore", summary="A store that says hello",
                 schemes=["hello"])


@hookimpl
def agl_register_commands(cli):
    @cli.command(name="hello")
    @click.argument("name")
    def hello(name):
        """Say hello."""
        click.echo(f"Hello, {name}!")
'''

BROKEN_PYPROJECT = (
    GOOD_PYPROJECT.replace("agl-hello", "agl-broken")
    .replace('hello = "agl_hello.hooks"', 'broken = "agl_broken.hooks"')
    .replace('"agl_hello"', '"agl_broken"')
)

BROKEN_HOOKS = "import agl_missing_backend_for_tests  # noqa: F401\n"


GOOD_STORE = """
from agl_core.store.memory import InMemoryLightningStore


class HelloStore(InMemoryLightningStore):
    pass
"""


def _write_dist(root: Path, package: str, pyproject: str, hooks: str, **modules: str) -> Path:
    (root / package).mkdir(parents=True)
    (root / "pyproject.toml").write_text(textwrap.dedent(pyproject))
    (root / package / "__init__.py").write_text("")
    (root / package / "hooks.py").write_text(textwrap.dedent(hooks))
    for name, source in modules.items():
        (root / package / f"{name}.py").write_text(textwrap.dedent(source))
    return root


@pytest.fixture(scope="module")
def site_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("plugins")
    target = base / "site"
    good = _write_dist(base / "good", "agl_hello", GOOD_PYPROJECT, GOOD_HOOKS, store=GOOD_STORE)
    broken = _write_dist(base / "broken", "agl_broken", BROKEN_PYPROJECT, BROKEN_HOOKS)
    for src in (good, broken):
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "-q",
                "--no-deps",
                "--no-build-isolation",
                "--no-index",
                "--target",
                str(target),
                str(src),
            ],
            check=True,
            timeout=300,
        )
    return target


def _agl(site: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("AGL_")}
    environ["PYTHONPATH"] = os.pathsep.join([str(site), *filter(None, [environ.get("PYTHONPATH")])])
    environ.update(env)
    return subprocess.run(
        [sys.executable, "-m", "agl_core.cli", *args],
        capture_output=True,
        text=True,
        env=environ,
        timeout=120,
    )


def test_installed_plugins_are_listed(site_dir: Path) -> None:
    result = _agl(site_dir, "plugins", "list", "--json")
    assert result.returncode == 0, result.stderr
    records = {r["name"]: r for r in json.loads(result.stdout)}
    hello = records["hello"]
    assert (hello["distribution"], hello["version"], hello["status"]) == ("agl-hello", "2.5.0", "ok")
    assert {"kind": "command", "name": "hello"} in hello["provides"]
    store = next(p for p in hello["provides"] if p["kind"] == "store")
    assert (store["name"], store["schemes"], store["target"]) == (
        "hello",
        ["hello"],
        "agl_hello.store:HelloStore",
    )
    broken = records["broken"]
    assert broken["status"] == "failed"
    assert broken["error"]["stage"] == "import"
    assert "agl_missing_backend_for_tests" in broken["error"]["message"]


def test_installed_plugin_command_runs(site_dir: Path) -> None:
    result = _agl(site_dir, "hello", "world")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "Hello, world!"


def test_check_and_switches_against_installed_plugins(site_dir: Path) -> None:
    assert _agl(site_dir, "plugins", "check").returncode == 1
    assert _agl(site_dir, "plugins", "check", AGL_DISABLE_PLUGINS="broken").returncode == 0
    assert _agl(site_dir, "plugins", "check", AGL_LOAD_PLUGINS="agl-hello").returncode == 0
    strict = _agl(site_dir, "plugins", "list", AGL_PLUGINS_STRICT="1")
    assert strict.returncode == 3  # ExitCode.BAD_INPUT, one line, no traceback
    assert "agl plugin 'broken'" in strict.stderr and "failed at stage 'import'" in strict.stderr
    assert "Traceback" not in strict.stderr
