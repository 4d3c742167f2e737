"""agl-mongo is found by its entry point, listed by `agl plugins list`, and absent from core alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import agl_core
from agl_core.plugins import PluginManager
from agl_core.store import open_store
from agl_testing import records_by_name, run_cli, use_plugin_manager

CORE_PYTHON = Path(__file__).resolve().parents[3] / ".venv" / "bin" / "python"


def test_plugin_is_listed_ok_with_its_version() -> None:
    """`agl plugins list --json` shows `mongo` from agl-mongo, ok, with its version and both schemes."""
    manager = PluginManager(strict=True)
    manager.load_entrypoints()
    result = run_cli("plugins", "list", "--json", manager=manager)
    assert result.exit_code == 0, result.stderr
    record = records_by_name(result.json())["mongo"]
    assert (record["status"], record["distribution"], record["version"]) == (
        "ok",
        "agl-mongo",
        agl_core.__version__,
    )
    (store,) = [p for p in record["provides"] if p["kind"] == "store"]
    assert (store["name"], store["schemes"], store["available"]) == (
        "mongo",
        ["mongodb", "mongodb+srv"],
        True,
    )


def test_hooks_do_not_import_pymongo() -> None:
    """Listing plugins never imports the backend: the hooks module pulls in agl_core only."""
    code = (
        "import sys; from agl_core.plugins import PluginManager; m = PluginManager(strict=True); "
        "m.load_entrypoints(); print('pymongo' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "False"


def test_open_store_resolves_both_schemes() -> None:
    """`open_store` opens the Mongo store for mongodb:// and mongodb+srv:// URIs (without connecting)."""
    from agl_mongo import MongoLightningStore

    manager = PluginManager(strict=True)
    manager.load_entrypoints()
    with use_plugin_manager(manager):
        store = open_store("mongodb://127.0.0.1:1/runs?partition_id=exp-1", retry_timeout=0)
        assert isinstance(store, MongoLightningStore)
        assert (store.database, store.partition_id) == ("runs", "exp-1")
        srv = open_store("mongodb+srv://user:secret@cluster.example.net/?database=agl2")
        assert isinstance(srv, MongoLightningStore)
        assert (srv.database, srv.partition_id) == ("agl2", "default")
        assert "secret" not in repr(srv)


@pytest.mark.skipif(not CORE_PYTHON.exists(), reason="no core-only venv at the repository root (.venv)")
def test_core_only_install_does_not_list_mongo(tmp_path: Path) -> None:
    """In the core venv (agl-core without this plugin) `agl plugins list` works and shows no `mongo`."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    out = subprocess.run(
        [str(CORE_PYTHON), "-m", "agl_core.cli", "plugins", "list", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "AGL_PLUGINS_STRICT": "1"},
        cwd=tmp_path,
        check=True,
    )
    names = {record["name"] for record in json.loads(out.stdout)}
    assert "mongo" not in names
    check = subprocess.run(
        [str(CORE_PYTHON), "-c", "import agl_mongo"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=tmp_path,
    )
    assert check.returncode != 0 and "agl_mongo" in check.stderr
