"""Plugins that call sys.exit(), raise BaseExceptions or import slowly never take agl down (issue 20).

The plugins are real distributions to importlib.metadata (a ``.dist-info`` folder with
``entry_points.txt`` on ``PYTHONPATH``), seen by ``agl`` in a subprocess.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agl_core.plugins import PluginManager
from agl_testing import fake_entry_point, plugin_module

SLOW_IMPORT_SECONDS = 0.3

PLUGINS = {
    # name: hooks module source
    "exiter": "import sys\nsys.exit(3)\n",
    "interrupter": "raise KeyboardInterrupt\n",
    "generatorexit": "raise GeneratorExit\n",
    "regexit": textwrap.dedent(
        """
        import sys
        from agl_core import hookimpl

        @hookimpl
        def agl_register_stores(registry):
            registry.add("doomed", "agl_regexit.hooks:Nothing", schemes=["doomed"])
            sys.exit(1)
        """
    ),
    "cmdexit": textwrap.dedent(
        """
        from agl_core import hookimpl

        @hookimpl
        def agl_register_commands(cli):
            raise SystemExit("bye")
        """
    ),
    "slow": textwrap.dedent(
        f"""
        import os, time
        from pathlib import Path
        from agl_core import hookimpl
        from agl_core.store.memory import InMemoryLightningStore

        Path(os.environ["AGL_TEST_IMPORT_MARKER"]).write_text("imported")
        time.sleep({SLOW_IMPORT_SECONDS})

        class SlowStore(InMemoryLightningStore):
            @classmethod
            def from_uri(cls, uri, **kwargs):
                return cls()

        @hookimpl
        def agl_register_stores(registry):
            registry.add("slowstore", "agl_slow.hooks:SlowStore", schemes=["slow"])
        """
    ),
}


def _write_plugin(site: Path, name: str, hooks: str) -> None:
    package = site / f"agl_{name}"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "hooks.py").write_text(hooks)
    info = site / f"agl_{name}-1.0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: agl-{name}\nVersion: 1.0.0\n")
    (info / "entry_points.txt").write_text(f"[agl]\n{name} = agl_{name}.hooks\n")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hostile-site")
    for name, hooks in PLUGINS.items():
        _write_plugin(root, name, hooks)
    return root


def _run(site: Path, marker: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("AGL_")}
    environ["PYTHONPATH"] = os.pathsep.join([str(site), *filter(None, [environ.get("PYTHONPATH")])])
    environ["AGL_TEST_IMPORT_MARKER"] = str(marker)
    environ.update(env)
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, env=environ, timeout=120, check=False
    )


def test_help_imports_no_plugin(site: Path, tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    result = _run(site, marker, "-m", "agl_core.cli", "--help")
    assert result.returncode == 0, result.stderr
    assert "store" in result.stdout and "plugins" in result.stdout
    assert "agl-slow" in result.stdout  # named from metadata, not imported
    assert not marker.exists()


def test_open_builtin_store_imports_no_plugin(site: Path, tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    code = "from agl_core.store import open_store; open_store('memory:'); print('opened')"
    result = _run(site, marker, "-c", code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "opened"
    assert not marker.exists()


def test_plugins_list_isolates_every_base_exception(site: Path, tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    result = _run(site, marker, "-m", "agl_core.cli", "plugins", "list", "--json")
    assert result.returncode == 0, result.stderr
    records = {r["name"]: r for r in json.loads(result.stdout)}
    expected = {
        "exiter": ("import", "SystemExit"),
        "interrupter": ("import", "KeyboardInterrupt"),
        "generatorexit": ("import", "GeneratorExit"),
        "regexit": ("agl_register_stores", "SystemExit"),
        "cmdexit": ("agl_register_commands", "SystemExit"),
    }
    for name, (stage, exc_type) in expected.items():
        record = records[name]
        assert record["status"] == "failed", record
        assert (record["error"]["stage"], record["error"]["type"]) == (stage, exc_type)
    slow = records["slow"]
    assert slow["status"] == "ok"
    assert slow["load_seconds"] >= SLOW_IMPORT_SECONDS
    assert {"kind": "store", "name": "slowstore"}.items() <= next(
        p for p in slow["provides"] if p["kind"] == "store"
    ).items()
    assert marker.exists()


def test_plugins_check_reports_instead_of_dying(site: Path, tmp_path: Path) -> None:
    result = _run(site, tmp_path / "marker", "-m", "agl_core.cli", "plugins", "check")
    assert result.returncode == 1  # problems found, not the plugin's sys.exit(3)
    assert "5 plugins failed to load" in result.stdout
    table = _run(site, tmp_path / "marker", "-m", "agl_core.cli", "plugins", "list")
    assert table.returncode == 0, table.stderr
    assert "Load" in table.stdout.splitlines()[0]


def test_open_store_of_plugin_scheme_survives_hostile_plugins(site: Path, tmp_path: Path) -> None:
    code = textwrap.dedent(
        """
        from agl_core.store import open_store
        print(type(open_store('slow:')).__name__)
        try:
            open_store('doomed:')
        except Exception as exc:
            print(type(exc).__name__)
        """
    )
    result = _run(site, tmp_path / "marker", "-c", code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["SlowStore", "UnknownComponentError"]


def test_real_ctrl_c_during_plugin_import_still_interrupts() -> None:
    def interrupted() -> object:
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(1000):  # the handler runs between bytecodes, almost at once
            pass
        return plugin_module("never")

    manager = PluginManager(strict=False)
    with pytest.raises(KeyboardInterrupt):
        manager.load_entrypoints([fake_entry_point("ctrlc", interrupted)])


def test_plugin_raised_keyboard_interrupt_is_isolated_in_process() -> None:
    def raises() -> object:
        raise KeyboardInterrupt

    manager = PluginManager(strict=False)
    (record,) = manager.load_entrypoints([fake_entry_point("fake-ctrlc", raises)])
    assert record.status == "failed" and record.error is not None
    assert record.error.type == "KeyboardInterrupt"
