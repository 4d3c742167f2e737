"""The plugin is discovered and healthy, and every 0.3 path in the core resolves to its machinery."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from importlib.metadata import version

import agl_legacy
import pytest

import agl_core as agl
from agl_core.plugins import PluginManager
from agl_testing import records_by_name, run_cli

# 0.3 path under agl_core -> the agl-legacy module its names come from
SHIMS = {
    "agl_core.client": "agl_legacy.client",
    "agl_core.server": "agl_legacy.server",
    "agl_core.runner.legacy": "agl_legacy.runner",
    "agl_core.trainer.legacy": "agl_legacy.trainer",
    "agl_core.utils.metrics": "agl_legacy.metrics",
    "agl_core.utils.server_launcher": "agl_legacy.server_launcher",
    "agl_core.utils.otlp": "agl_legacy.otlp",
    "agl_core.cli.prometheus": "agl_legacy.prometheus",
    "agl_core.store.client_server": "agl_legacy.client_server",
    "agl_core.store.collection_based": "agl_legacy.collection_based",
    "agl_core.store.collection": "agl_legacy.collection",
    "agl_core.store.collection.base": "agl_legacy.collection.base",
    "agl_core.store.collection.memory": "agl_legacy.collection.memory",
    "agl_core.store.collection.mongo": "agl_legacy.collection.mongo",
}


def _loaded_manager() -> PluginManager:
    manager = PluginManager(strict=True)
    manager.load_entrypoints()
    return manager


def test_legacy_is_listed_ok_with_its_version() -> None:
    result = run_cli("plugins", "list", "--json", manager=_loaded_manager())
    assert result.exit_code == 0, result.output
    record = records_by_name(result.json())["legacy"]
    assert record["status"] == "ok" and record["distribution"] == "agl-legacy"
    assert record["version"] == version("agl-legacy") == agl_legacy.__version__
    assert {"kind": "store", "name": "collection"}.items() <= record["provides"][0].items()


def test_plugins_check_passes() -> None:
    result = run_cli("plugins", "check", manager=_loaded_manager())
    assert result.exit_code == 0, result.output + result.stderr


@pytest.mark.parametrize(("path", "source"), sorted(SHIMS.items()))
def test_every_name_of_the_plugin_module_resolves_at_its_03_path(path: str, source: str) -> None:
    shim, provider = importlib.import_module(path), importlib.import_module(source)
    names = getattr(provider, "__all__", None) or [n for n in vars(provider) if not n.startswith("_")]
    assert names
    for name in names:
        assert getattr(shim, name) is getattr(provider, name), f"{path}.{name}"
    with pytest.raises(AttributeError, match=f"module '{path}' has no attribute 'Nope'"):
        shim.Nope  # noqa: B018


def test_top_level_names_and_star_imports() -> None:
    from agl_legacy.client import AgentLightningClient, DevTaskLoader
    from agl_legacy.collection_based import CollectionBasedLightningStore
    from agl_legacy.runner import LegacyAgentRunner
    from agl_legacy.server import AgentLightningServer

    assert agl.LegacyAgentRunner is LegacyAgentRunner and agl.runner.LegacyAgentRunner is LegacyAgentRunner
    assert agl.CollectionBasedLightningStore is CollectionBasedLightningStore
    assert agl.store.CollectionBasedLightningStore is CollectionBasedLightningStore
    assert agl.AgentLightningClient is AgentLightningClient and agl.DevTaskLoader is DevTaskLoader
    assert agl.AgentLightningServer is AgentLightningServer
    namespace: dict[str, object] = {}
    exec("from agl_core.store.collection import *", namespace)
    assert "InMemoryLightningCollections" in namespace and "FilterOptions" in namespace


def test_the_registry_builds_the_collection_store() -> None:
    from agl_legacy.collection_based import CollectionBasedLightningStore

    store = _loaded_manager().registry("store").create("collection")
    assert isinstance(store, CollectionBasedLightningStore)


def test_importing_agl_core_and_the_entry_point_imports_no_legacy_module() -> None:
    code = (
        "import json, sys\n"
        "import agl_core, agl_core.client, agl_core.store.collection\n"
        "from agl_core.plugins import PluginManager\n"
        "PluginManager(strict=True).load_entrypoints()\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('agl_legacy'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == ["agl_legacy", "agl_legacy.hooks"]
