"""The plugin is discovered, healthy and light; the registry resolves ``sft`` and ``unsloth`` to SFT."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import version

import agl_unsloth
from agl_core.plugins import PluginManager
from agl_testing import records_by_name, run_cli


def _loaded_manager() -> PluginManager:
    manager = PluginManager(strict=True)
    manager.load_entrypoints()
    return manager


def test_unsloth_is_listed_ok_with_its_version() -> None:
    result = run_cli("plugins", "list", "--json", manager=_loaded_manager())
    assert result.exit_code == 0, result.output
    record = records_by_name(result.json())["unsloth"]
    assert record["status"] == "ok"
    assert record["distribution"] == "agl-unsloth"
    assert record["version"] == version("agl-unsloth") == agl_unsloth.__version__
    assert {"kind": "algorithm", "name": "sft"}.items() <= record["provides"][0].items()


def test_plugins_check_passes() -> None:
    result = run_cli("plugins", "check", manager=_loaded_manager())
    assert result.exit_code == 0, result.output + result.stderr


def test_the_registry_resolves_sft_and_its_alias() -> None:
    from agl_unsloth.algorithm import SFT

    registry = _loaded_manager().registry("algorithm")
    for name in ("sft", "unsloth"):
        entry = registry.get(name)
        assert entry.distribution == "agl-unsloth"
        assert entry.missing == ()
        assert entry.load() is SFT
    assert agl_unsloth.SFT is SFT


def test_loading_the_entry_point_imports_nothing_heavy() -> None:
    code = (
        "import json, sys\n"
        "from agl_core.plugins import PluginManager\n"
        "PluginManager(strict=True).load_entrypoints()\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('unsloth', 'torch', 'transformers', 'trl', 'agl_unsloth'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == ["agl_unsloth", "agl_unsloth.hooks"]
