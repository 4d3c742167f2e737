"""The plugin is discovered, healthy and light; without it, core says which package to install."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import version

import pytest

import agl_apo
from agl_core.errors import UnknownComponentError
from agl_core.plugins import PluginManager
from agl_testing import records_by_name, run_cli, use_plugin_manager


def _loaded_manager() -> PluginManager:
    manager = PluginManager(strict=True)
    manager.load_entrypoints()
    return manager


def test_apo_is_listed_ok_with_its_version() -> None:
    result = run_cli("plugins", "list", "--json", manager=_loaded_manager())
    assert result.exit_code == 0, result.output
    record = records_by_name(result.json())["apo"]
    assert record["status"] == "ok"
    assert record["distribution"] == "agl-apo"
    assert record["version"] == version("agl-apo") == agl_apo.__version__
    assert {"kind": "algorithm", "name": "apo"}.items() <= record["provides"][0].items()


def test_plugins_check_passes() -> None:
    result = run_cli("plugins", "check", manager=_loaded_manager())
    assert result.exit_code == 0, result.output + result.stderr


def test_the_registry_resolves_apo_to_the_algorithm() -> None:
    from agl_apo.algorithm import APO

    entry = _loaded_manager().registry("algorithm").get("apo")
    assert entry.distribution == "agl-apo"
    assert entry.missing == ()
    assert entry.load() is APO


def test_without_the_plugin_trainer_names_the_package() -> None:
    from agl_core.trainer import Trainer

    with use_plugin_manager(PluginManager(strict=True)), pytest.raises(UnknownComponentError) as info:
        Trainer(algorithm="apo", progress=False)
    assert "pip install agl-apo" in str(info.value)


def test_disabled_plugin_in_a_fresh_process_names_the_package() -> None:
    code = (
        "from agl_core.trainer import Trainer\n"
        "try:\n"
        "    Trainer(algorithm='apo', progress=False)\n"
        "except Exception as exc:\n"
        "    print(type(exc).__name__, exc)\n"
    )
    env = {**os.environ, "AGL_DISABLE_PLUGINS": "apo"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("UnknownComponentError") and "pip install agl-apo" in out.stdout


def test_loading_the_entry_point_imports_nothing_heavy() -> None:
    code = (
        "import json, sys\n"
        "from agl_core.plugins import PluginManager\n"
        "PluginManager(strict=True).load_entrypoints()\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('openai', 'matplotlib', 'agl_apo'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == ["agl_apo", "agl_apo.hooks"]


def test_top_level_factory_and_trainer_build_the_plugin_algorithm(monkeypatch: pytest.MonkeyPatch) -> None:
    import agl_core as agl
    from agl_apo.algorithm import APO
    from agl_core.trainer import Trainer

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with use_plugin_manager(_loaded_manager()):
        apo = agl.APO(beam_width=3, run_id="factory")
        trainer = Trainer(algorithm={"type": "apo", "beam_rounds": 5}, progress=False)
    assert isinstance(apo, APO) and apo.beam_width == 3 and apo.run_id == "factory"
    assert isinstance(trainer.algorithm, APO) and trainer.algorithm.beam_rounds == 5


def test_top_level_factory_without_the_plugin_names_the_package() -> None:
    import agl_core as agl

    with use_plugin_manager(PluginManager(strict=True)), pytest.raises(UnknownComponentError) as info:
        agl.APO(beam_width=3)
    assert "pip install agl-apo" in str(info.value)
