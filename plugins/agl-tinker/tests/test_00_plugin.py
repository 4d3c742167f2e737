"""The plugin is discovered, healthy and light; the registry resolves ``tinker`` to the algorithm."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import version

import agl_tinker
from agl_core.plugins import PluginManager
from agl_testing import records_by_name, run_cli


def _loaded_manager() -> PluginManager:
    manager = PluginManager(strict=True)
    manager.load_entrypoints()
    return manager


def test_tinker_is_listed_ok_with_its_version() -> None:
    result = run_cli("plugins", "list", "--json", manager=_loaded_manager())
    assert result.exit_code == 0, result.output
    record = records_by_name(result.json())["tinker"]
    assert record["status"] == "ok"
    assert record["distribution"] == "agl-tinker"
    assert record["version"] == version("agl-tinker") == agl_tinker.__version__
    assert {"kind": "algorithm", "name": "tinker"}.items() <= record["provides"][0].items()


def test_plugins_check_passes() -> None:
    result = run_cli("plugins", "check", manager=_loaded_manager())
    assert result.exit_code == 0, result.output + result.stderr


def test_the_registry_resolves_tinker_to_the_algorithm() -> None:
    from agl_tinker.algorithm import Tinker

    entry = _loaded_manager().registry("algorithm").get("tinker")
    assert entry.distribution == "agl-tinker"
    assert entry.missing == ()
    assert entry.load() is Tinker
    assert agl_tinker.Tinker is Tinker


def test_loading_the_entry_point_imports_nothing_heavy() -> None:
    code = (
        "import json, sys\n"
        "from agl_core.plugins import PluginManager\n"
        "PluginManager(strict=True).load_entrypoints()\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('tinker', 'torch', 'transformers', 'agl_tinker'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == ["agl_tinker", "agl_tinker.hooks"]
