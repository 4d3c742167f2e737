"""The plugin is discovered and healthy with verl installed, and says what to install without it."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

import agl_verl
import agl_verl.hooks
from agl_core.plugins import PluginManager
from agl_testing import records_by_name, run_cli

PLUGIN_DIR = Path(__file__).resolve().parents[1]
CORE_PYTHON = PLUGIN_DIR.parents[1] / ".venv" / "bin" / "python"


def _loaded_manager() -> PluginManager:
    manager = PluginManager(strict=True)
    manager.load_entrypoints()
    return manager


def test_verl_is_listed_ok_with_its_version() -> None:
    result = run_cli("plugins", "list", "--json", manager=_loaded_manager())
    assert result.exit_code == 0, result.output
    record = records_by_name(result.json())["verl"]
    assert record["status"] == "ok"
    assert record["distribution"] == "agl-verl"
    assert record["version"] == version("agl-verl") == agl_verl.__version__
    assert {"kind": "algorithm", "name": "verl"}.items() <= record["provides"][0].items()
    assert record["provides"][0]["missing"] == []


def test_the_registry_resolves_verl_to_the_algorithm() -> None:
    from agl_core import VERL as CoreVERL
    from agl_verl.algorithm import VERL

    entry = _loaded_manager().registry("algorithm").get("verl")
    assert entry.distribution == "agl-verl"
    assert entry.load() is VERL
    assert agl_verl.VERL is VERL
    assert CoreVERL is not None


def test_loading_the_entry_point_imports_neither_verl_nor_torch() -> None:
    code = (
        "import json, sys\n"
        "from agl_core.plugins import PluginManager\n"
        "PluginManager(strict=True).load_entrypoints()\n"
        "print(json.dumps([m for m in ('verl', 'torch', 'ray', 'agl_verl.algorithm') if m in sys.modules]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_a_missing_requirement_blocks_loading_with_the_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(agl_verl.hooks, "REQUIRES", ["verl>=99"])
    manager = PluginManager(strict=True)
    manager.register(agl_verl.hooks, name="verl-probe", distribution="agl-verl", version="0.4.0")
    entry = manager.registry("algorithm").get("verl")
    assert entry.missing and entry.missing[0].startswith("verl>=99")
    # the hint names what to install: the plugin's extra that carries the requirement
    with pytest.raises(Exception, match=r"needs verl>=99 .*pip install 'agl-verl\[verl\]'"):
        entry.load()
    listed = run_cli("plugins", "list", manager=manager)
    assert "needs verl>=99" in listed.output


@pytest.mark.skipif(not CORE_PYTHON.exists(), reason="needs the core-only venv of the repository (.venv)")
def test_core_only_venv_lists_verl_as_needing_packages() -> None:
    code = (
        "import agl_verl.hooks\n"
        "from agl_core.plugins import PluginManager\n"
        "from agl_testing import run_cli\n"
        "m = PluginManager(strict=True)\n"
        "m.register(agl_verl.hooks, name='verl', distribution='agl-verl', version='0.4.0')\n"
        "print(run_cli('plugins', 'list', manager=m).output)\n"
    )
    probe = subprocess.run([str(CORE_PYTHON), "-c", "import verl"], capture_output=True, timeout=120)
    if probe.returncode == 0:
        pytest.skip("the core venv has verl installed")
    env = {"PYTHONPATH": str(PLUGIN_DIR), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([str(CORE_PYTHON), "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert "needs verl>=0.9,<0.10" in out.stdout
